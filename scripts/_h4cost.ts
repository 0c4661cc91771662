import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { schemaCost, schemaExpandedSize } from '../src/policy/index.ts';
const out: [number, string, number, string][] = [];
function walk(d: string) { for (const f of readdirSync(d)) { const p = join(d, f); if (statSync(p).isDirectory()) walk(p); else if (/\.ya?ml$/.test(f)) for (const doc of parseAllDocuments(readFileSync(p, 'utf8'))) { const o = doc.toJS(); const s = o?.spec?.validate?.schema; if (s !== undefined && /Portal/.test(o.kind ?? '')) { const c = schemaCost(s); out.push([c.cost, p, schemaExpandedSize(s), c.heaviest.path]); } } } }
for (const d of process.argv.slice(2)) walk(d);
out.sort((a, b) => b[0] - a[0]);
for (const o of out.slice(0, 12)) console.log(o[0].toExponential(2), o[2], o[1], o[3]);
console.log(out.length);
