/**
 * What the two job screens share (Mail jobs and Jobs): the list's header with Refresh, the
 * State filter and the state badge, each screen giving its own states and their tones; and
 * a job's page around its details (the way back, loading, its heading with Retry and Cancel).
 */
import type { ComponentChildren } from 'preact';
import { SCREENS, titleOf, type ScreenId } from '../screen-list';
import { Icon } from './icons';
import { JobActions } from './job-actions';
import { Badge, Button, ErrorNote, Field, Loading, PageHeader, type Async } from './ui';

export type Tone = 'neutral' | 'ok' | 'warn' | 'danger' | 'info';

/** A job list's heading: the screen's title, what it lists, and Refresh. */
export function JobListHeader({
  screen,
  subtitle,
  onRefresh,
}: {
  screen: ScreenId;
  subtitle: string;
  onRefresh: () => void;
}) {
  return (
    <PageHeader
      title={titleOf(screen)}
      subtitle={subtitle}
      actions={
        <Button icon="refresh" onClick={onRefresh}>
          Refresh
        </Button>
      }
    />
  );
}

/** The State filter of a job list: any, or one of the states `tones` names. */
export function StateFilter({
  tones,
  value,
  onChange,
}: {
  tones: Record<string, Tone>;
  value: string;
  onChange: (e: Event) => void;
}) {
  return (
    <Field label="State">
      {(id) => (
        <select id={id} value={value} onChange={onChange}>
          <option value="">any</option>
          {Object.keys(tones).map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

/** A job's state as a badge in its tone (neutral for a state the list does not know). */
export function StateBadge({ tones, s }: { tones: Record<string, Tone>; s: string }) {
  return <Badge tone={tones[s] ?? 'neutral'}>{s}</Badge>;
}

/**
 * A job's page on screen `screen`: the link back to its list, the load's error or progress,
 * then the job's heading (`head`: title, subtitle, and Retry / Cancel as JobActions takes
 * them; the page reloads after either) and its details: its id, then `children` (`dt`/`dd`
 * pairs).
 */
export function JobPage<J extends { id: string }>({
  screen,
  job,
  head,
  children,
}: {
  screen: ScreenId;
  job: Async<J>;
  head: (j: J) => {
    title: string;
    subtitle: ComponentChildren;
    actions: Omit<Parameters<typeof JobActions>[0], 'after'>;
  };
  children: (j: J) => ComponentChildren;
}) {
  const list = SCREENS.find((s) => s.id === screen)!;
  const j = job.data;
  const h = j === undefined ? undefined : head(j);
  return (
    <>
      <a class="back" href={`#/${list.path}`}>
        <Icon name="chevronLeft" size={14} /> {list.title}
      </a>
      <ErrorNote error={job.error} onRetry={job.reload} />
      {job.loading && j === undefined && <Loading />}
      {j !== undefined && h && (
        <>
          <PageHeader
            title={h.title}
            subtitle={h.subtitle}
            actions={<JobActions {...h.actions} after={job.reload} />}
          />
          <section class="panel">
            <div class="panel-body">
              <dl class="kv">
                <dt>Job id</dt>
                <dd class="mono">{j.id}</dd>
                {children(j)}
              </dl>
            </div>
          </section>
        </>
      )}
    </>
  );
}
