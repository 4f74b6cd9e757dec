-- Default templates used by Public Auth. Operators may edit them (admin panel or
-- `basalt templates put`); this file only inserts what is absent.
-- Variables: app_name, email, link, token, expires_in_minutes.
INSERT INTO basalt.mail_templates (name, subject, text, html) VALUES
('password_reset',
 'Reset your {{ app_name }} password',
 $tpl$Hello,

Someone asked to reset the password of the {{ app_name }} account {{ email }}.

To choose a new password, open this link:
{{ link }}

Or enter this code: {{ token }}

The link and the code expire in {{ expires_in_minutes }} minutes. If you did not ask for this, ignore this message: your password stays as it is.
$tpl$,
 $tpl$<!doctype html>
<html><body style="font-family: sans-serif; line-height: 1.5">
<p>Hello,</p>
<p>Someone asked to reset the password of the {{ app_name }} account <strong>{{ email }}</strong>.</p>
<p><a href="{{ link }}">Choose a new password</a></p>
<p>Or enter this code: <code>{{ token }}</code></p>
<p>The link and the code expire in {{ expires_in_minutes }} minutes. If you did not ask for this, ignore this message: your password stays as it is.</p>
</body></html>
$tpl$),
('verify_email',
 'Confirm your e-mail address for {{ app_name }}',
 $tpl$Hello,

Please confirm that {{ email }} is your e-mail address for {{ app_name }} by opening this link:
{{ link }}

Or enter this code: {{ token }}

The link and the code expire in {{ expires_in_minutes }} minutes. If you did not create an account, ignore this message.
$tpl$,
 $tpl$<!doctype html>
<html><body style="font-family: sans-serif; line-height: 1.5">
<p>Hello,</p>
<p>Please confirm that <strong>{{ email }}</strong> is your e-mail address for {{ app_name }}.</p>
<p><a href="{{ link }}">Confirm my address</a></p>
<p>Or enter this code: <code>{{ token }}</code></p>
<p>The link and the code expire in {{ expires_in_minutes }} minutes. If you did not create an account, ignore this message.</p>
</body></html>
$tpl$)
ON CONFLICT (name) DO NOTHING;
