import { groupBy } from '../../../src/collections/index.ts'
import { plural } from '../../../src/text/index.ts'
import type { FC } from 'hono/jsx'
import type { RubricVersionRecord } from '../../../durable-objects/rubric-instance/index.ts'
import type { StepTimelineEntry } from '../../../durable-objects/run-coordinator/index.ts'
import type { StepUpdateOutcome } from '../../../src/schemas/status.ts'
import { histogram, lineChart } from '../../../src/charts/index.ts'
import type { Rubric } from '../../../src/schemas/rubric.ts'
import { MemoryKind } from '../../../src/schemas/memory.ts'
import { HISTOGRAM_STEPS, type HackingFlag, type RunDashboard, type StepScores } from '../data.ts'
import { diffRubricVersions, type DiffPart } from '../rubric-diff.ts'
import { runHref } from './home.tsx'
import { Chart, formatDuration, formatScore, formatTime, Layout, Section, type ViewerInfo } from './layout.tsx'

/** Characters of a memory document shown before "show all". */
const DOC_PREVIEW_CHARS = 320
/** Flagged rollouts shown before "show more". */
const FLAGS_SHOWN = 5

/**
 * One run: overview, score charts, step timeline, rubric versions with diffs and the updater's rationale,
 * reward-hacking flags with evidence, the memory browser, and the LLM calls.
 * @example c.html(<RunPage viewer={viewer} data={await loadRunDashboard(c.env, run, options)} />)
 */
export const RunPage: FC<{ viewer: ViewerInfo; data: RunDashboard }> = ({ viewer, data }) => {
  const { run, status } = data
  const scoresByStep = new Map(data.stepScores.map((row) => [row.step, row]))
  const totalScores = data.stepScores.reduce((sum, row) => sum + row.count, 0)
  const totalFlags = data.timeline.reduce(
    (sum, step) => sum + step.instances.reduce((n, instance) => n + (instance.update?.hacking_flags ?? 0), 0),
    0,
  )
  const totalCalls = data.llmCalls.reduce((sum, group) => sum + group.calls, 0)
  const lastScores = data.stepScores.at(-1)
  return (
    <Layout title={`Run ${run.id}`} viewer={viewer} wide>
      <div class="crumbs">
        <a href="/">Runs</a> / {run.id}
      </div>
      <div class="page-head">
        <h1 data-run-title={run.id}>Run {run.id}</h1>
        <span class="pill info">{run.config.mode}</span>
        <span class="pill info">{run.config.rubrics_mode}</span>
        <span class={`pill ${statusTone(status.status)}`}>
          step {status.step}: {status.status}
        </span>
      </div>
      <div class="stats">
        <Stat label="Current step" value={String(status.step)} sub={status.status} />
        <Stat
          label="Rubric version"
          value={`v${status.rubric_version}`}
          sub={`${data.history.length} versions of ${data.instanceId ?? 'no instance yet'}`}
        />
        <Stat label="Rollouts scored" value={String(totalScores)} sub={plural(data.stepScores.length, 'step')} />
        <Stat
          label="Last step mean"
          value={formatScore(lastScores?.mean)}
          sub={lastScores ? `step ${lastScores.step}, ${lastScores.count} scores` : 'no scores yet'}
        />
        <Stat label="Hacking flags" value={String(totalFlags)} sub="rollouts flagged by the analyzer" />
        <Stat label="LLM calls" value={String(totalCalls)} sub={`${data.llmCalls.length} role/model/outcome groups`} />
      </div>
      <nav class="section-nav" aria-label="Sections">
        <a href="#scores">Scores</a>
        <a href="#timeline">Step timeline</a>
        <a href="#health">Criterion health</a>
        <a href="#rubrics">Rubric versions</a>
        <a href="#hacking">Reward hacking</a>
        <a href="#memory">Memory</a>
        <a href="#llm">LLM calls</a>
      </nav>
      <ScoresSection data={data} />
      <TimelineSection timeline={data.timeline} scores={scoresByStep} lowSpread={lowSpreadByStep(data)} />
      <HealthSection data={data} />
      <RubricsSection data={data} />
      <HackingSection data={data} />
      <MemorySection data={data} />
      <LlmSection data={data} />
    </Layout>
  )
}

const Stat: FC<{ label: string; value: string; sub?: string }> = ({ label, value, sub }) => (
  <div class="stat">
    <div class="label">{label}</div>
    <div class="value">{value}</div>
    {sub && <div class="sub">{sub}</div>}
  </div>
)

const ScoresSection: FC<{ data: RunDashboard }> = ({ data }) => {
  const flaggedShare = data.timeline.flatMap((step) => {
    const updates = step.instances.flatMap((instance) => (instance.update ? [instance.update] : []))
    if (updates.length === 0 || step.rollouts === 0) return []
    return [{ x: step.step, y: updates.reduce((sum, update) => sum + update.hacking_flags, 0) / step.rollouts }]
  })
  const trend = lineChart({
    title: 'Mean score, lowest score and share flagged as hacking, per step',
    width: 1080,
    height: 300,
    xLabel: 'step',
    // Scores and the flagged share are both fractions in [0, 1]; the axis says so rather than "score".
    yLabel: 'score · share flagged (0–1)',
    yDomain: [0, 1],
    series: [
      { name: 'mean score', points: data.stepScores.map((row) => ({ x: row.step, y: row.mean })) },
      { name: 'lowest score', points: data.stepScores.map((row) => ({ x: row.step, y: row.min })) },
      { name: 'share flagged as hacking', points: flaggedShare },
    ],
  })
  return (
    <Section id="scores" title="Scores" note="first score of each rollout (repeated requests left out)">
      <Chart svg={trend} />
      <h3 style="margin-top:14px">Score distribution per step</h3>
      {data.stepScores.length === 0 ? (
        <p class="empty">No scores yet.</p>
      ) : (
        <div class="charts">
          {data.stepScores.slice(-HISTOGRAM_STEPS).map((row) => (
            <Chart
              svg={histogram({
                title: `Step ${row.step} · ${plural(row.count, 'rollout')}`,
                counts: row.bins,
                domain: [0, 1],
                xLabel: 'score',
                yLabel: 'rollouts',
                width: 360,
                height: 220,
              })}
            />
          ))}
        </div>
      )}
    </Section>
  )
}

const TimelineSection: FC<{
  timeline: StepTimelineEntry[]
  scores: Map<number, StepScores>
  lowSpread: Map<number, string[]>
}> = ({ timeline, scores, lowSpread }) => (
  <Section
    id="timeline"
    title="Step timeline"
    note={
      'opened by the first rollout; closed by /complete or rollouts_per_step; ' +
      "updated when every instance's update is done"
    }
  >
    {timeline.length === 0 ? (
      <p class="empty">No step has started: nothing has been scored in this run.</p>
    ) : (
      <table>
        <thead>
          <tr>
            <th class="num">Step</th>
            <th>Status</th>
            <th class="num">Rollouts</th>
            <th class="num">Mean</th>
            <th>Scored on</th>
            <th>After update</th>
            <th>Strategy</th>
            <th class="num">Flags</th>
            <th title="criteria whose grades did not separate responses to the same prompt">Low spread</th>
            <th title="a second model re-judging a sample: mean |judge − auditor| and rank correlation">Audit</th>
            <th>Analyses</th>
            <th>Opened (UTC)</th>
            <th>Update took</th>
          </tr>
        </thead>
        <tbody>
          {[...timeline].reverse().map((step) => (
            <TimelineRow step={step} score={scores.get(step.step)} lowSpread={lowSpread.get(step.step)} />
          ))}
        </tbody>
      </table>
    )}
  </Section>
)

/** One step of the timeline: its scores, what its updates made of it, and how long they took. */
const TimelineRow: FC<{ step: StepTimelineEntry; score: StepScores | undefined; lowSpread: string[] | undefined }> = ({
  step,
  score,
  lowSpread,
}) => {
  const updates = step.instances.flatMap((instance) => (instance.update ? [instance.update] : []))
  const sum = (key: 'hacking_flags' | 'analysed' | 'failed') =>
    updates.reduce((total, update) => total + update[key], 0)
  const reasons = reasonCounts(updates)
  const strategies = [...new Set(updates.flatMap((update) => (update.strategy ? [update.strategy] : [])))]
  const errors = updates.flatMap((update) => (update.error ? [update.error] : []))
  const changed = updates.some((update) => update.changed)
  const after = updates.length ? Math.max(...updates.map((update) => update.rubric_version)) : null
  const failed = sum('failed') ? ` · ${sum('failed')} failed` : ''
  const analyses = updates.length ? `${sum('analysed')} of ${step.rollouts} analysed${failed}` : '—'
  return (
    <tr data-step={step.step}>
      <td class="num">{step.step}</td>
      <td>
        <span class={`pill ${statusTone(step.status)}`}>{step.status}</span>
      </td>
      <td class="num">{step.rollouts}</td>
      <td class="num">{formatScore(score?.mean)}</td>
      <td>
        {score
          ? score.min_version === score.max_version
            ? `v${score.min_version}`
            : `v${score.min_version}–v${score.max_version}`
          : '—'}
      </td>
      <td>
        {after === null ? '—' : `v${after}`} {changed && <span class="pill ok">new</span>}
      </td>
      <td>
        {strategies.join(', ') || '—'}
        {errors.length > 0 && (
          <div class="refused" title={errors.join('\n')}>
            update error
          </div>
        )}
      </td>
      <td class="num">{updates.length ? sum('hacking_flags') : '—'}</td>
      <td data-low-spread>{lowSpread?.join(', ') || '—'}</td>
      <td data-audit>{auditSummary(updates)}</td>
      <td>
        {analyses}
        {reasons && (
          <div class="muted" title="why the analysed rollouts were chosen">
            {reasons}
          </div>
        )}
      </td>
      <td>{formatTime(step.opened_at)}</td>
      <td>{formatDuration(step.closed_at, step.updated_at)}</td>
    </tr>
  )
}

/** A step's audits: mean |judge − auditor| and rank correlation, with how many scores the auditor graded. */
function auditSummary(updates: readonly StepUpdateOutcome[]): string {
  const audits = updates.flatMap((update) => (update.audit ? [update.audit] : []))
  if (audits.length === 0) return '—'
  return audits
    .map(
      (audit) =>
        `|Δ| ${audit.mean_abs_diff === null ? '—' : audit.mean_abs_diff.toFixed(2)} · ` +
        `ρ ${audit.rank_corr === null ? '—' : audit.rank_corr.toFixed(2)} (${audit.judged} of ${audit.sampled})`,
    )
    .join('; ')
}

/** Per step, the criteria whose within-group spread was below the run's retirement threshold. */
function lowSpreadByStep(data: RunDashboard): Map<number, string[]> {
  const low = data.health.filter(
    (row) => row.within_group_std !== null && row.within_group_std < data.run.config.retire_below_spread,
  )
  return new Map([...groupBy(low, (row) => row.step)].map(([step, rows]) => [step, rows.map((row) => row.rubric_id)]))
}

/** Each criterion's newest health figures in a table, then its spread and mean per step as a small chart. */
const HealthSection: FC<{ data: RunDashboard }> = ({ data }) => {
  const byRubric = groupBy(data.health, (row) => row.rubric_id)
  return (
    <Section
      id="health"
      title="Criterion health"
      note={
        'spread: standard deviation of a criterion’s grades (0–1) among responses to the same prompt, pooled; ' +
        `below ${data.run.config.retire_below_spread} it gives the trainer no signal`
      }
    >
      {byRubric.size === 0 ? (
        <p class="empty">No closed step has been measured yet.</p>
      ) : (
        <>
          <HealthTable byRubric={byRubric} current={data.history.at(-1)?.rubrics ?? []} />
          <HealthCharts byRubric={byRubric} />
        </>
      )}
    </Section>
  )
}

type HealthRow = RunDashboard['health'][number]

/** Each criterion's figures at the newest step it was measured in, and whether it is still in the rubric set. */
const HealthTable: FC<{ byRubric: Map<string, HealthRow[]>; current: readonly Rubric[] }> = ({ byRubric, current }) => {
  const inSet = new Map(current.map((rubric) => [rubric.id, rubric]))
  const percent = (share: number) => `${Math.round(share * 100)}%`
  const fixed = (value: number | null, digits: number) => (value === null ? '—' : value.toFixed(digits))
  return (
    <table>
      <thead>
        <tr>
          <th>Criterion</th>
          <th>Kind</th>
          <th class="num">Step</th>
          <th class="num">Spread</th>
          <th class="num">Mean</th>
          <th class="num">At top</th>
          <th class="num">At 0</th>
          <th class="num">Corr. with score</th>
          <th class="num">n</th>
        </tr>
      </thead>
      <tbody>
        {[...byRubric].map(([rubricId, steps]) => {
          const last = steps.at(-1)!
          const rubric = inSet.get(rubricId)
          return (
            <tr data-criterion={rubricId}>
              <td title={rubric?.text}>{rubricId}</td>
              <td>
                {rubric ? (
                  <span class="pill info">{rubric.is_anchor ? 'anchor' : 'adaptive'}</span>
                ) : (
                  <span class="pill warn">retired</span>
                )}
              </td>
              <td class="num">{last.step}</td>
              <td class="num">{fixed(last.within_group_std, 3)}</td>
              <td class="num">{fixed(last.mean, 2)}</td>
              <td class="num">{percent(last.share_max)}</td>
              <td class="num">{percent(last.share_min)}</td>
              <td class="num">{fixed(last.corr_with_score, 2)}</td>
              <td class="num">{last.n}</td>
            </tr>
          )
        })}
      </tbody>
    </table>
  )
}

/** Per criterion, its spread and mean at each step it was measured in. */
const HealthCharts: FC<{ byRubric: Map<string, HealthRow[]> }> = ({ byRubric }) => (
  <div class="charts">
    {[...byRubric].map(([rubricId, steps]) => (
      <Chart
        svg={lineChart({
          title: rubricId,
          width: 360,
          height: 220,
          xLabel: 'step',
          yLabel: '0–1',
          yDomain: [0, 1],
          series: [
            {
              name: 'spread',
              points: steps.flatMap((row) =>
                row.within_group_std === null ? [] : [{ x: row.step, y: row.within_group_std }],
              ),
            },
            { name: 'mean', points: steps.map((row) => ({ x: row.step, y: row.mean })) },
          ],
        })}
      />
    ))}
  </div>
)

const RubricsSection: FC<{ data: RunDashboard }> = ({ data }) => {
  const { history, instanceId, instances, run } = data
  const newestFirst = history.map((record, index) => ({ record, previous: history[index - 1] })).reverse()
  return (
    <Section
      id="rubrics"
      title="Rubric versions"
      note={instanceId ? `instance ${instanceId} · ${history.length} versions · newest first` : undefined}
    >
      {run.config.rubrics_mode === 'per_instance' && instances.length > 0 && (
        <form method="get" action={`${runHref(run.id)}#rubrics`} class="search">
          <label for="instance" class="muted">
            Instance
          </label>
          <select id="instance" name="instance">
            {instances.map((instance) => (
              <option value={instance.instance_id} selected={instance.instance_id === instanceId}>
                {`${instance.instance_id} (v${instance.rubric_version}, ${plural(instance.rollouts, 'rollout')})`}
              </option>
            ))}
          </select>
          <button type="submit">Show</button>
        </form>
      )}
      {instanceId === null ? (
        <p class="empty">No instance has scored a rollout yet; each instance gets its rubrics on its first rollout.</p>
      ) : (
        newestFirst.map(({ record, previous }) => <VersionEntry record={record} previous={previous} />)
      )}
    </Section>
  )
}

const VersionEntry: FC<{ record: RubricVersionRecord; previous: RubricVersionRecord | undefined }> = ({
  record,
  previous,
}) => {
  const diff = previous ? diffRubricVersions(previous.rubrics, record.rubrics) : null
  return (
    <article class={`version ${previous ? 'changed' : ''}`} data-version={record.version}>
      <div class="version-head">
        <h3>Version {record.version}</h3>
        {record.strategy && <span class="pill info">{record.strategy}</span>}
        <span class="note">
          {record.step === null ? 'initial' : `after step ${record.step}`} · {formatTime(record.created_at)} ·{' '}
          {record.note}
        </span>
      </div>
      {record.rationale && (
        <div class="rationale">
          <strong>Updater's rationale: </strong>
          {record.rationale}
        </div>
      )}
      {diff && (
        <ul class="diff-list" data-diff={`${previous!.version}->${record.version}`}>
          {diff.added.map((rubric) => (
            <li class="added">
              <span class="sign">+</span>
              <RubricLabel rubric={rubric} /> {rubric.text}
            </li>
          ))}
          {diff.removed.map((rubric) => (
            <li class="removed">
              <span class="sign">−</span>
              <RubricLabel rubric={rubric} /> <del>{rubric.text}</del>
            </li>
          ))}
          {diff.changed.map((change) => (
            <li class="changed">
              <span class="sign">~</span>
              <RubricLabel rubric={change.after} />
              {change.weight && (
                <span class="pill warn">
                  weight {change.weight[0]} → {change.weight[1]}
                </span>
              )}{' '}
              {change.text ? <WordDiff parts={change.text} /> : change.after.text}
            </li>
          ))}
          {diff.added.length + diff.removed.length + diff.changed.length === 0 && (
            <li class="muted">no rubric changed</li>
          )}
          <li class="muted">
            {`${diff.added.length} added · ${diff.removed.length} removed · ` +
              `${diff.changed.length} changed · ${diff.unchanged} unchanged`}
          </li>
        </ul>
      )}
      {record.refused.length > 0 && (
        <details>
          <summary class="refused">{record.refused.length} parts of the proposal refused</summary>
          <ul>
            {record.refused.map((reason) => (
              <li>{reason}</li>
            ))}
          </ul>
        </details>
      )}
      <details open={!previous}>
        <summary>
          All {record.rubrics.length} rubrics of version {record.version}
        </summary>
        <RubricTable rubrics={record.rubrics} />
      </details>
    </article>
  )
}

const RubricLabel: FC<{ rubric: Rubric }> = ({ rubric }) => (
  <>
    <code>{rubric.id}</code>{' '}
    <span class="muted">
      (w {rubric.weight}
      {rubric.is_anchor ? ', anchor' : ''})
    </span>{' '}
  </>
)

const WordDiff: FC<{ parts: DiffPart[] }> = ({ parts }) => (
  <span class="word-diff">
    {parts.map((part) =>
      part.kind === 'added' ? <ins>{part.text}</ins> : part.kind === 'removed' ? <del>{part.text}</del> : part.text,
    )}
  </span>
)

const RubricTable: FC<{ rubrics: Rubric[] }> = ({ rubrics }) => (
  <table>
    <thead>
      <tr>
        <th>Id</th>
        <th>Kind</th>
        <th class="num">Weight</th>
        <th>Text</th>
      </tr>
    </thead>
    <tbody>
      {rubrics.map((rubric) => (
        <tr>
          <td>
            <code>{rubric.id}</code>
          </td>
          <td>{rubric.is_anchor ? <span class="pill">anchor</span> : <span class="pill info">adaptive</span>}</td>
          <td class="num">{rubric.weight}</td>
          <td>{rubric.text}</td>
        </tr>
      ))}
    </tbody>
  </table>
)

const HackingSection: FC<{ data: RunDashboard }> = ({ data }) => {
  const shown = data.hacking.slice(0, FLAGS_SHOWN)
  const more = data.hacking.slice(FLAGS_SHOWN)
  return (
    <Section
      id="hacking"
      title="Reward hacking"
      note={`${data.hacking.length} newest rollouts the analyzer flagged, with its evidence`}
    >
      {data.hacking.length === 0 ? (
        <p class="empty">No rollout has been flagged as reward hacking.</p>
      ) : (
        <>
          {shown.map((flag) => (
            <FlagCard flag={flag} />
          ))}
          {more.length > 0 && (
            <details class="more">
              <summary>{more.length} more flagged rollouts</summary>
              {more.map((flag) => (
                <FlagCard flag={flag} />
              ))}
            </details>
          )}
        </>
      )}
    </Section>
  )
}

const FlagCard: FC<{ flag: HackingFlag }> = ({ flag }) => (
  <div class="flag" data-flag={flag.rollout_id}>
    <div class="flag-head">
      <span class={`pill ${flag.severity === 'high' ? 'bad' : 'warn'}`}>{flag.severity}</span>
      <code>{flag.rollout_id}</code>
      <span class="note">
        step {flag.step} · instance {flag.instance_id} · score {formatScore(flag.score)}
      </span>
      {flag.tactics.map((tactic) => (
        <span class="pill">{tactic}</span>
      ))}
    </div>
    <div>{flag.assessment}</div>
    {flag.evidence.length > 0 && (
      <ul class="evidence">
        {flag.evidence.map((item) => (
          <li>{item}</li>
        ))}
      </ul>
    )}
    {flag.rollout && (
      <details>
        <summary>The rollout's output{flag.rollout.truncated ? ' (first 800 characters)' : ''}</summary>
        <div class="note">Prompt: {flag.rollout.input.slice(0, 300)}</div>
        <blockquote>{flag.rollout.output}</blockquote>
      </details>
    )}
  </div>
)

const MemorySection: FC<{ data: RunDashboard }> = ({ data }) => {
  const { request, documents } = data.memory
  return (
    <Section
      id="memory"
      title="Memory"
      note={
        request.q ? `semantic search: ${documents.length} closest documents` : `newest ${documents.length} documents`
      }
    >
      {/* biome-ignore lint/a11y/useSemanticElements: some dashboard users' browsers lack the new <search> element */}
      <form method="get" action={`${runHref(data.run.id)}#memory`} class="search" role="search">
        {data.run.config.rubrics_mode === 'per_instance' && data.instanceId && (
          <input type="hidden" name="instance" value={data.instanceId} />
        )}
        <input
          type="search"
          name="q"
          value={request.q ?? ''}
          placeholder="Search the run's memory by meaning, e.g. answers that flatter the grader"
          aria-label="Search memory"
        />
        <select name="kind" aria-label="Kind">
          <option value="">all kinds</option>
          {MemoryKind.options.map((kind) => (
            <option value={kind} selected={kind === request.kind}>
              {kind.replace('_', ' ')}
            </option>
          ))}
        </select>
        <button type="submit">Search</button>
      </form>
      {documents.length === 0 ? (
        <p class="empty">
          {request.q ? 'Nothing in memory matches.' : 'Memory is empty: analyses appear once rollouts are analysed.'}
        </p>
      ) : (
        documents.map((doc) => (
          <div class="doc" data-memory={doc.kind}>
            <div class="doc-head">
              <span class={`pill ${doc.kind === 'rubric_update' ? 'ok' : doc.kind === 'analysis' ? 'info' : ''}`}>
                {doc.kind.replace('_', ' ')}
              </span>
              <span class="note">
                step {doc.step} · instance {doc.instance_id} · {formatTime(doc.created_at)}
              </span>
              {doc.similarity !== undefined && <span class="pill">similarity {doc.similarity.toFixed(3)}</span>}
            </div>
            {doc.text.length > DOC_PREVIEW_CHARS ? (
              <details>
                <summary>
                  <span class="doc-text preview">
                    {doc.text.slice(0, DOC_PREVIEW_CHARS)}… <span class="show-all">show all</span>
                  </span>
                </summary>
                <p class="doc-text">{doc.text}</p>
              </details>
            ) : (
              <p class="doc-text">{doc.text}</p>
            )}
          </div>
        ))
      )}
    </Section>
  )
}

const LlmSection: FC<{ data: RunDashboard }> = ({ data }) => (
  <Section id="llm" title="LLM calls" note="every attempt, by role, model and outcome (no prompt text is stored)">
    {data.llmCalls.length === 0 ? (
      <p class="empty">No LLM call recorded.</p>
    ) : (
      <table>
        <thead>
          <tr>
            <th>Role</th>
            <th>Model</th>
            <th>Outcome</th>
            <th class="num">Calls</th>
            <th class="num">Mean latency</th>
            <th class="num">Prompt tokens</th>
            <th class="num">Completion tokens</th>
          </tr>
        </thead>
        <tbody>
          {data.llmCalls.map((group) => (
            <tr>
              <td>{group.role}</td>
              <td>
                <code>{group.model}</code>
              </td>
              <td>
                <span class={`pill ${group.outcome === 'ok' ? 'ok' : 'warn'}`}>{group.outcome}</span>
              </td>
              <td class="num">{group.calls}</td>
              <td class="num">{Math.round(group.mean_latency_ms)} ms</td>
              <td class="num">{group.prompt_tokens}</td>
              <td class="num">{group.completion_tokens}</td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
  </Section>
)

function statusTone(status: string): string {
  return status === 'updated' ? 'ok' : status === 'updating' ? 'warn' : status === 'collecting' ? 'info' : ''
}

/** Why the analysed rollouts of a step were chosen, in words: "group_best 4 · score_range 8". */
function reasonCounts(updates: readonly StepUpdateOutcome[]): string {
  const counts = new Map<string, number>()
  for (const update of updates)
    for (const [reason, count] of Object.entries(update.reasons))
      counts.set(reason, (counts.get(reason) ?? 0) + (count ?? 0))
  return [...counts].map(([reason, count]) => `${reason.replaceAll('_', ' ')} ${count}`).join(' · ')
}
