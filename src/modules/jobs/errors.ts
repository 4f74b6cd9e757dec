/**
 * Error codes of jobs (docs/extensions.md, "Jobs"; the admin API and `basalt jobs`), declared once.
 */
import { defineErrors } from '../../http/errors';

export const JobErrors = defineErrors({
  notFound: {
    status: 404,
    code: 'job_not_found',
    message: (id: string) => `No job has id ${id}.`,
  },
  notRetryable: {
    status: 409,
    code: 'job_not_retryable',
    message: (id: string, state: string) => `Job ${id} is ${state}: only a dead or cancelled job can be retried.`,
  },
  notCancellable: {
    status: 409,
    code: 'job_not_cancellable',
    message: (id: string, state: string) => `Job ${id} is ${state}: only a queued job can be cancelled.`,
  },
});
