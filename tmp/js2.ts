import { z } from 'zod'
import { RunConfig } from '../src/schemas/run-config.ts'
const js = z.toJSONSchema(RunConfig, { io: 'input', unrepresentable: 'any' }) as any
for (const k of ['rollouts_per_step','audit','analysis','agents','prompts','max_active_rubrics']) console.log(k, JSON.stringify(js.properties[k]).slice(0,900))
