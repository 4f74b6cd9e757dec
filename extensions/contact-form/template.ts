/** The message the operator receives. Ensured at setup; an operator's edits in the admin panel are kept. */
import type { TemplateInput } from 'basalt';

export const TEMPLATE: TemplateInput = {
  name: 'contact_form_message',
  subject: 'Contact form: {{ subject | default: "new message" }} (from {{ name }})',
  text: `New message from the contact form.

Name: {{ name }}
E-mail: {{ email }}
Subject: {{ subject }}
Sent from: {{ ip }}

{{ message }}
`,
  html: `<p>New message from the contact form.</p>
<table>
<tr><th align="left">Name</th><td>{{ name }}</td></tr>
<tr><th align="left">E-mail</th><td><a href="mailto:{{ email }}">{{ email }}</a></td></tr>
<tr><th align="left">Subject</th><td>{{ subject }}</td></tr>
<tr><th align="left">Sent from</th><td>{{ ip }}</td></tr>
</table>
<pre style="white-space: pre-wrap">{{ message }}</pre>
`,
};
