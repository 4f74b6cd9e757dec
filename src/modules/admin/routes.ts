/**
 * The admin API under /api/admin (docs/admin-api.md): main listener only, format A,
 * JSON bodies only. Every route passes the guard (CSRF layers, session) before body
 * validation, and its handler receives the administrator as `admin`; each screen's
 * routes live in routes/<screen>.ts.
 */
import type { AnyElysia } from 'elysia';
import { AREA, type AreaFacts } from '../../http/areas';
import { success } from '../../http/envelope';
import type { Basalt } from '../../services';
import { adminArea, type AdminApp, type Ok, type OtherAreas } from './area';
import { authRoutes } from './routes/auth';
import { keysRoutes } from './routes/keys';
import { settingsRoutes } from './routes/settings';
import { mailRoutes } from './routes/mail';
import { templatesRoutes } from './routes/templates';
import { usersRoutes } from './routes/users';
import { userSignInRoutes } from './routes/user-sign-in';
import { dashboardRoutes } from './routes/dashboard';
import { extensionsRoutes } from './routes/extensions';
import { auditRoutes } from './routes/audit';
import { dataRoutes } from './routes/data';
import { backupsRoutes } from './routes/backups';
import { adminsRoutes } from './routes/admins';
import { jobsRoutes } from './routes/jobs';
import { logsRoutes } from './routes/logs';

const screens: ((app: AdminApp, p: Basalt, ok: Ok, other: OtherAreas) => AdminApp)[] = [
  authRoutes,
  dashboardRoutes,
  keysRoutes,
  settingsRoutes,
  mailRoutes,
  templatesRoutes,
  usersRoutes,
  userSignInRoutes,
  dataRoutes,
  extensionsRoutes,
  auditRoutes,
  backupsRoutes,
  adminsRoutes,
  jobsRoutes,
  logsRoutes,
];

export function adminRoutes(p: Basalt, area: AreaFacts, other: OtherAreas): AnyElysia {
  const ok: Ok = (data) => success(AREA.admin.envelope, data);
  let app = adminArea(p, area);
  for (const add of screens) app = add(app, p, ok, other);
  return app;
}
