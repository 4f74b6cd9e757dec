/** Helpers for tests that read /api/openapi.json. */

/** `schema` with every `$ref` into `doc` replaced by its target (recursively; the document has no cycles). */
export function deref(doc: any, schema: any): any {
  if (Array.isArray(schema)) return schema.map((s) => deref(doc, s));
  if (!schema || typeof schema !== 'object') return schema;
  if (typeof schema.$ref === 'string') {
    const target = schema.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce((o: any, k: string) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
    const { $ref: _r, ...rest } = schema;
    return deref(doc, { ...target, ...rest });
  }
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, deref(doc, v)]));
}
