/**
 * Creates every area's service, in dependency order. One line per area.
 */
import type { Platform } from './platform';

export async function createServices(p: Platform): Promise<void> {
  void p;
}
