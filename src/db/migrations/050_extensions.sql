-- Extensions (CONTRACT §10): each extension's own migrations, applied once per
-- (extension, file), and its settings (ext.<name>.<key>), kept apart from the
-- platform's typed settings table because their keys are declared at run time.
CREATE TABLE basalt.extension_migrations (
  extension  text NOT NULL,
  name       text NOT NULL,
  checksum   text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (extension, name)
);

CREATE TABLE basalt.extension_settings (
  extension  text NOT NULL,
  key        text NOT NULL,
  value      jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (extension, key)
);
