/**
 * The data and bodies of bench/relations.ts, shared with bench/profile.ts (BENCH_WORKLOAD=expand):
 * 200 authors, 2,000 posts and 100,000 comments; 1,000 customers and 100,000 orders.
 */
import type { QueryBody } from '../src/modules/database/model';

export const RELATIONS_SQL = `
CREATE TABLE public.bench_authors (id serial PRIMARY KEY, name text NOT NULL, country text NOT NULL);
CREATE TABLE public.bench_posts (id serial PRIMARY KEY, author_id int4 NOT NULL REFERENCES public.bench_authors(id),
                                 title text NOT NULL, created_at timestamptz NOT NULL);
CREATE TABLE public.bench_comments (id serial PRIMARY KEY, post_id int4 NOT NULL REFERENCES public.bench_posts(id),
                                    body text NOT NULL, created_at timestamptz NOT NULL);
CREATE INDEX bench_comments_latest ON public.bench_comments (post_id, created_at DESC);
CREATE TABLE public.bench_customers (id serial PRIMARY KEY, country text NOT NULL);
CREATE TABLE public.bench_orders (id serial PRIMARY KEY, customer_id int4 NOT NULL REFERENCES public.bench_customers(id),
                                  status text NOT NULL, total numeric(10,2) NOT NULL);
INSERT INTO public.bench_authors (name, country) SELECT 'author ' || g, 'C' || (g % 20) FROM generate_series(1, 200) g;
INSERT INTO public.bench_posts (author_id, title, created_at)
  SELECT 1 + g % 200, 'post ' || g, now() - g * interval '1 minute' FROM generate_series(1, 2000) g;
INSERT INTO public.bench_comments (post_id, body, created_at)
  SELECT 1 + g % 2000, 'comment ' || g, now() - g * interval '1 second' FROM generate_series(1, 100000) g;
INSERT INTO public.bench_customers (country) SELECT 'C' || (g % 20) FROM generate_series(1, 1000) g;
INSERT INTO public.bench_orders (customer_id, status, total)
  SELECT 1 + g % 1000, (ARRAY['paid','pending','refunded'])[1 + g % 3], (g % 500) + 0.5 FROM generate_series(1, 100000) g;
ANALYZE;`;

/** The tables a bench key may read. */
export const RELATIONS_TABLES = ['bench_authors', 'bench_posts', 'bench_comments', 'bench_customers', 'bench_orders'];

/** A posts page: 20 posts, each with its author (many-to-one) and its 3 latest comments (one-to-many). */
export const POSTS_PAGE = {
  entity: 'bench_posts',
  action: 'select',
  fields: ['id', 'title', 'created_at'],
  sort: [{ field: 'created_at', direction: 'desc' }],
  limit: 20,
  expand: {
    author_id: { fields: ['id', 'name'] },
    bench_comments_via_post_id: {
      fields: ['id', 'body', 'created_at'],
      sort: [{ field: 'created_at', direction: 'desc' }],
      limit: 3,
    },
  },
} as QueryBody;

/** 100,000 orders grouped by their customer's country (a many-to-one path), count and sum, sorted by the sum. */
export const ORDERS_BY_COUNTRY = {
  entity: 'bench_orders',
  action: 'aggregate',
  group_by: ['customer_id.country'],
  aggregates: [
    { fn: 'count', as: 'orders' },
    { fn: 'sum', field: 'total', as: 'revenue' },
  ],
  sort: [{ field: 'revenue', direction: 'desc' }],
} as QueryBody;

/** A wrk script posting `body` with `key`; the first non-200 answer is printed. */
export function queryLua(key: string, body: unknown): string {
  return `wrk.method = "POST"
wrk.path = "/api/v1/db/query"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-API-Key"] = "${key}"
wrk.body = '${JSON.stringify(body)}'
local shown = false
response = function(status, headers, body)
  if status ~= 200 and not shown then shown = true; io.stderr:write(status .. " " .. body .. "\\n") end
end
`;
}
