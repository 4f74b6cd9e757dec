/**
 * The platform schema `basalt`, one ordered list of SQL files embedded in the
 * executable. Append only: never edit a file that has shipped; add the next number.
 */
import m001 from './migrations/001_core.sql' with { type: 'text' };

export const platformMigrations: { name: string; sql: string }[] = [
  { name: '001_core', sql: m001 },
];
