import { z } from 'zod'
import { RunConfig } from '../src/schemas/run-config.ts'
const js = z.toJSONSchema(RunConfig, { io: 'input', unrepresentable: 'any' }) as any
console.log(JSON.stringify(js, null, 1).slice(0, 5000))
