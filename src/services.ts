/**
 * Creates every area's service, in dependency order. One line per area.
 */
import type { Platform } from './platform';
import { createKeyService } from './modules/keys/service';
import { createMailService } from './modules/mail/service';
import { createAuthService } from './modules/auth/service';
import { createDatabaseService } from './modules/database/service';
import { createExtensionRegistry } from './extensions/registry';
import { createAdminService } from './modules/admin/service';
import { createRealtimeService } from './modules/realtime/service';

export async function createServices(p: Platform): Promise<void> {
  p.services.keys = createKeyService(p);
  p.services.mail = createMailService(p);
  p.services.auth = await createAuthService(p);
  p.services.database = await createDatabaseService(p);
  p.services.extensions = createExtensionRegistry(p);
  p.services.admin = createAdminService(p);
  p.services.realtime = createRealtimeService(p);
}
