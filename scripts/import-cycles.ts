/**
 * The import circles of src/: every strongly connected component of the import graph
 * (type imports, `import('…')` types, dynamic imports and `declare module` blocks included),
 * largest first. docs/architecture.md (Layers) says which circles are allowed: none (`--max 1`).
 *
 *   bun scripts/import-cycles.ts [--max N] [DIR]
 *
 * Prints each component's files; with --max N it exits 1 when one has more than N files.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const args = process.argv.slice(2);
const maxAt = args.indexOf('--max');
const max = maxAt >= 0 ? Number(args.splice(maxAt, 2)[1]) : undefined;
const root = resolve(args[0] ?? 'src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

// `from '…'`, `import '…'`, `import('…')` and `declare module '…'`: every way one file names another.
const SPECIFIER = /\bfrom\s*['"]([^'"]+)['"]|\bimport\s*\(?\s*['"]([^'"]+)['"]|\bdeclare\s+module\s+['"]([^'"]+)['"]/g;

function target(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = resolve(dirname(from), spec);
  for (const candidate of [base, `${base}.ts`, `${base}.tsx`, join(base, 'index.ts'), join(base, 'index.tsx')])
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  return undefined;
}

const all = files(root);
const edges = new Map<string, Set<string>>();
for (const file of all) {
  const text = readFileSync(file, 'utf8');
  const out = new Set<string>();
  for (const m of text.matchAll(SPECIFIER)) {
    const to = target(file, m[1] ?? m[2] ?? m[3] ?? '');
    if (to && to !== file) out.add(to);
  }
  edges.set(file, out);
}

// Tarjan's strongly connected components.
const index = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
const components: string[][] = [];
let next = 0;
function visit(v: string): void {
  index.set(v, next);
  low.set(v, next++);
  stack.push(v);
  onStack.add(v);
  for (const w of edges.get(v) ?? []) {
    if (!index.has(w)) {
      visit(w);
      low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
  }
  if (low.get(v) === index.get(v)) {
    const component: string[] = [];
    let w: string | undefined;
    do {
      w = stack.pop();
      if (w === undefined) break;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) components.push(component);
  }
}
for (const file of all) if (!index.has(file)) visit(file);

components.sort((a, b) => b.length - a.length);
const name = (f: string) => relative(process.cwd(), f);
console.log(`${all.length} files, ${components.length} circles`);
for (const c of components) console.log(`\n${c.length} files:\n  ${c.map(name).sort().join('\n  ')}`);
const over = max === undefined ? [] : components.filter((c) => c.length > max);
if (over.length) {
  console.error(`\n${over.length} circle(s) over ${max} files`);
  process.exit(1);
}
