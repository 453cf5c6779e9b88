/**
 * `npx tsx bench/score-profile.ts [--target mock|stub|bare] [--duration s] [--connections n]`:
 * where does workerd's CPU go under /score load? Serves the same build as `npm run bench`, samples a V8
 * CPU profile of every workerd isolate while loading one target, and prints busy CPU ms per request per
 * isolate, self time per bundle module, the hottest functions, and inclusive time of the /score steps.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import {
  BARE_HOST,
  buildBundles,
  createRun,
  measure,
  onInterrupt,
  startBench,
  stubRunConfig,
  type LoadTarget,
} from './harness.ts'
import { bundleModuleMap, connectInspector, freePort, summarizeProfile, type CpuProfile } from './profile.ts'

/** Functions of the Worker bundle whose inclusive (synchronous) time is worth seeing. */
const STEPS = [
  'validateJsonBody',
  'identify',
  'resolve',
  'requestModels',
  'forRole',
  'agentSettingsFor',
  'scoreRollout',
  'scoreRollouts',
  'judgementKey',
  'sha256Hex',
  'canonicalJson',
  'judge',
  'judgeRollout',
  'buildScorerRequest',
  'parseScorerReply',
  'injectionTactics',
  'recordTelemetry',
  'recordOnShard',
  'record',
  'insert',
  'entry',
  'announce',
  'report',
  'currentTally',
  'complete',
  'safeParse',
  'parse',
]

/**
 * Profiles every isolate while one target is under load and prints the summary.
 * @example await profileScore({ target: 'mock', durationS: 5, connections: 64 })
 */
export async function profileScore(options: {
  target: 'mock' | 'stub' | 'bare'
  durationS: number
  connections: number
  top: number
}): Promise<void> {
  const buildDir = mkdtempSync(join(tmpdir(), 'rh-profile-'))
  const forgetBuildDir = onInterrupt(() => rmSync(buildDir, { recursive: true, force: true }))
  const bundles = await buildBundles(buildDir)
  const inspectorPort = await freePort()
  const server = await startBench(bundles, { stub: 'node', storage: 'memory', inspectorPort })
  try {
    const token = await createRun(server, 'bench-stub', stubRunConfig(server.stubBaseUrl))
    const targets: Record<string, LoadTarget> = {
      mock: { label: '/score mock', path: '/score', prefix: 'mock' },
      stub: {
        label: '/score stub',
        path: '/runs/bench-stub/score',
        headers: { authorization: `Bearer ${token}` },
        prefix: 'stub',
      },
      bare: { label: 'bare', path: '/score', headers: { host: BARE_HOST }, prefix: 'bare' },
    }
    const target = targets[options.target]!
    const listing = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as { id: string }[]
    const sessions = await Promise.all(
      listing.map(async ({ id }) => ({ id, session: await connectInspector(inspectorPort, id) })),
    )
    for (const { session } of sessions) {
      await session.send('Profiler.enable')
      await session.send('Profiler.setSamplingInterval', { interval: 250 })
    }
    await measure(server.url, target, { connections: options.connections, durationS: 2, warmupS: 0, outputChars: 1200 })
    for (const { session } of sessions) await session.send('Profiler.start')
    const measured = await measure(server.url, target, {
      connections: options.connections,
      durationS: options.durationS,
      warmupS: 0,
      outputChars: 1200,
    })
    const profiles = await Promise.all(
      sessions.map(async ({ id, session }) => ({
        id,
        profile: (await session.send<{ profile: CpuProfile }>('Profiler.stop')).profile,
      })),
    )
    for (const { session } of sessions) session.close()

    const requests = measured.requests2xx
    console.log(
      `\n${target.label}: ${options.connections} connections, ${measured.durationS.toFixed(1)} s, ${measured.rps.toFixed(0)} req/s, workerd CPU ${measured.cpu.workerd.toFixed(2)} cores`,
    )
    console.log(
      `workerd CPU per request (from /proc): ${((measured.cpu.workerd * measured.durationS * 1_000) / requests).toFixed(3)} ms\n`,
    )
    console.log('sampled non-idle time per request, by isolate (V8 sampling profiler). All isolates share one workerd')
    console.log(
      'thread, so these overlap and overcount; compare shares within an isolate, and /proc CPU for absolute cost:',
    )
    const moduleOfApp = bundleModuleMap(bundles.workerScript)
    for (const { id, profile } of profiles) {
      const summary = summarizeProfile(profile, undefined)
      if (summary.busyMs / requests < 0.001) continue
      const top = summary.byGroup
        .slice(0, 4)
        .map(({ name, selfMs }) => `${name} ${(selfMs / requests).toFixed(3)}`)
        .join(', ')
      console.log(
        `  ${id.padEnd(40)} ${(summary.busyMs / requests).toFixed(3).padStart(8)} ms/req  (${((summary.busyMs / summary.totalMs) * 100).toFixed(0)}% of its sampled time): ${top}`,
      )
    }
    const app = profiles.find(
      ({ id }) => id === 'core:user:app' || (options.target === 'bare' && id === 'core:user:bare'),
    )
    const appProfile = options.target === 'bare' ? profiles.find(({ id }) => id === 'core:user:bare') : app
    if (!appProfile) return
    const summary = summarizeProfile(
      appProfile.profile,
      options.target === 'bare' ? bundleModuleMap(bundles.bareScript) : moduleOfApp,
      STEPS,
    )
    const perReq = (ms: number) =>
      `${(ms / requests).toFixed(3).padStart(8)} ms/req ${((ms / summary.busyMs) * 100).toFixed(1).padStart(5)}%`
    console.log(`\n${appProfile.id}: self time by module (busy ${perReq(summary.busyMs)})`)
    for (const { name, selfMs } of summary.byGroup.slice(0, options.top))
      console.log(`  ${name.padEnd(60)} ${perReq(selfMs)}`)
    console.log(`\n${appProfile.id}: hottest functions (self time)`)
    for (const { name, selfMs } of summary.byFunction.slice(0, options.top))
      console.log(`  ${name.slice(0, 90).padEnd(90)} ${perReq(selfMs)}`)
    console.log(`\n${appProfile.id}: inclusive synchronous time of the /score steps`)
    for (const { name, totalMs } of summary.inclusive
      .filter(({ totalMs }) => totalMs > 0)
      .sort((a, b) => b.totalMs - a.totalMs))
      console.log(`  ${name.padEnd(30)} ${perReq(totalMs)}`)
  } finally {
    await server.dispose()
    rmSync(buildDir, { recursive: true, force: true })
    forgetBuildDir()
  }
}

if (process.argv[1]?.endsWith('score-profile.ts')) {
  const { values } = parseArgs({
    options: {
      target: { type: 'string' },
      duration: { type: 'string' },
      connections: { type: 'string' },
      top: { type: 'string' },
    },
  })
  const target = (values.target ?? 'mock') as 'mock' | 'stub' | 'bare'
  profileScore({
    target,
    durationS: Number(values.duration ?? 5),
    connections: Number(values.connections ?? 64),
    top: Number(values.top ?? 25),
  }).catch((error: unknown) => {
    console.error(error)
    process.exit(1)
  })
}
