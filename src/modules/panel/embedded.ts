/**
 * The panel's files embedded in the executable. In a checkout this is null and the
 * panel is bundled from src/admin-ui at first request; build.ts compiles the
 * executable with this module replaced by one that imports the bundled files
 * (Bun.build `files`), so `dist/basalt` carries them and needs no source.
 */
export interface EmbeddedPanelFile {
  name: string;
  text: string;
}

export const embeddedPanel: EmbeddedPanelFile[] | null = null;
