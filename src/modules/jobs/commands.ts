/**
 * `basalt jobs list|retry|cancel`: extensions' jobs (docs/extensions.md, "Jobs"), through the
 * same service and audited changes as the admin API's Jobs screen.
 */
import { operand, printList, UsageError, type Command } from '../../cli/command';
import { AppError } from '../../http/errors';
import { CLI_ACTOR } from '../admin/audit';
import { cancelJob, retryJob } from '../admin/changes';
import { JOB_STATES, type JobRow, type JobState } from './store';

/** A refused change (unknown job, wrong state) is one clear line, exit code 1. */
function explain(e: unknown): never {
  throw e instanceof AppError ? new Error(e.message) : e;
}

const line = (j: JobRow) =>
  `${j.id}  ${j.state.padEnd(9)} ${`${j.extension}/${j.name}`.padEnd(32)} ${j.kind.padEnd(4)} ${j.attempts}/${j.max_attempts}  ${j.created_at.toISOString()}${
    j.errors.length ? `  ${j.errors.at(-1)!.error.split('\n')[0]!.slice(0, 120)}` : ''
  }`;

/** `basalt jobs retry|cancel ID`: the audited change, and what became of the job. */
function change(verb: 'retry' | 'cancel', summary: string, run: typeof retryJob, done: string): Command {
  return {
    name: `jobs ${verb}`,
    usage: `basalt jobs ${verb} ID`,
    summary,
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const id = operand(positionals, `jobs ${verb} needs a job ID`);
      const j = await run(platform!, CLI_ACTOR, id).catch(explain);
      io.out(`job ${j.id} ${done}`);
    },
  };
}

export const jobCommands: Command[] = [
  {
    name: 'jobs list',
    usage:
      'basalt jobs list [--extension E] [--name N] [--state queued|running|succeeded|dead|cancelled] [--limit N] [--json]',
    summary: "List extensions' jobs, newest first (with each attempt's error in --json).",
    options: {
      extension: { type: 'string' },
      name: { type: 'string' },
      state: { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean' },
    },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const state = values.state as string | undefined;
      if (state !== undefined && !(JOB_STATES as string[]).includes(state))
        throw new UsageError(`--state must be one of ${JOB_STATES.join(', ')}`);
      const limit = values.limit === undefined ? 100 : Number(values.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit must be 1-10000');
      const rows = await platform!.services.jobs.list({
        extension: values.extension as string | undefined,
        name: values.name as string | undefined,
        state: state as JobState | undefined,
        limit,
      });
      printList(io, rows, { json: values.json, empty: 'no jobs', print: (j) => io.out(line(j)) });
    },
  },
  change('retry', 'Queue a dead or cancelled job again, with fresh attempts (audited).', retryJob, 'queued again'),
  change('cancel', 'Cancel a queued job (audited).', cancelJob, 'cancelled'),
];
