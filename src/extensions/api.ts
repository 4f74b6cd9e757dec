/**
 * The module `basalt` as extensions see it: `import { defineExtension, t } from 'basalt'`.
 * The loader provides it at run time (also inside the compiled executable), so an
 * extension folder needs no node_modules of its own.
 */
export { defineExtension, type ExtensionDefinition, type ExtensionSettingDef } from './define';
export type { ExtensionContext, ExtensionDb, ExtensionRealtime } from './context';
export type { ChannelFollower, ChannelRule } from '../modules/realtime/service';
export type { ExtensionMail } from './mail';
export type { ExtensionCron, ExtensionJobs, ExtensionOn } from './jobs';
export type { CronRun, CronOptions, EnqueueOptions, HookOptions } from '../modules/jobs/service';
export type { Job, JobOptions } from '../modules/jobs/runner';
export type { PlatformEvent, PlatformEventType, RowAction, RowEvent } from '../modules/jobs/hooks';
export type { MailMessage, TemplateInput } from '../modules/mail/service';
export type { ExtensionSettings } from './settings-store';
export type { ApiKeyPrincipal, Permission, UserPrincipal } from './guards';
export { AppError, Errors } from '../http/errors';
export { envelopeB, envelopeC } from './schemas';
export { t } from 'elysia';
/** The streaming multipart parser (busboy), for uploads that must not be buffered. */
export { default as busboy } from 'busboy';
