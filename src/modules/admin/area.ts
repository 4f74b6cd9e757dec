/**
 * The admin area's app as each screen's routes (routes/<screen>.ts) receive it, and the
 * shape of its success bodies. Apart from routes.ts, which mounts the screens, so that a
 * screen's file and the list of screens do not import each other.
 */
import { Elysia } from 'elysia';
import { rootOf, type AREA, type AreaFacts } from '../../http/areas';
import type { SuccessBodyOf } from '../../http/envelope-schemas';
import type { Basalt } from '../../services';
import { adminGuard } from './guard';

export function adminArea(p: Basalt, area: AreaFacts) {
  return new Elysia({ name: 'basalt.admin', prefix: rootOf(area) }).derive(adminGuard(p, rootOf(area)));
}

/**
 * The admin area's app as each screen receives it: the gate's `admin` on the context,
 * so a handler's `body`, `query`, `params` and `admin` are typed from its route.
 */
export type AdminApp = ReturnType<typeof adminArea>;

/** A success body of the admin area, in its envelope (`{success: true, data}`, docs/admin-api.md). */
export type Ok = <T>(data: T) => SuccessBodyOf<(typeof AREA.admin)['envelope'], T>;

/** What the screens need to know of other areas, from their route-list entries (src/app.ts). */
export interface OtherAreas {
  /** The Public Auth root (/api/v1/auth): the provider check shows the callback URL under it. */
  authRoot: string;
}
