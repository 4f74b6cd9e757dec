/**
 * Schemas that hold the platform's own data or PostgreSQL's: `basalt`, extensions'
 * `ext_*`, `information_schema` and every `pg_*`. Never the data schema
 * (`database.data_schema`): the Database API would expose them and operator migrations
 * would write into them.
 */
export function isPlatformSchema(schema: string): boolean {
  return (
    schema === 'basalt' || schema === 'information_schema' || schema.startsWith('ext_') || schema.startsWith('pg_')
  );
}
