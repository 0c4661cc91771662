/**
 * The NODE_OPTIONS the chart's Deployment gives Portal's container at its
 * default values (the V8 heap caps it derives from the memory limit), read
 * from what the real Helm renders, so a bench side "as deployed" runs with
 * the chart's flags rather than a copy of its formula.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { helmPath } from '../test/support/tools.ts';

const chartDir = fileURLToPath(new URL('../charts/portal', import.meta.url));

interface Rendered {
  kind?: string;
  spec?: { template?: { spec?: { containers?: { name?: string; env?: { name: string; value?: string }[] }[] } } };
}

/** `{NODE_OPTIONS}` as the chart sets it for the `portal` container, or `{}` when it sets none. */
export async function chartNodeOptions(): Promise<{ NODE_OPTIONS?: string }> {
  const out = await new Promise<string>((resolve, reject) => {
    execFile(helmPath(), ['template', 'portal', chartDir, '--namespace', 'portal-system'], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(new Error(`helm template failed: ${stderr || err.message}`)) : resolve(stdout),
    );
  });
  const deployment = parseAllDocuments(out)
    .map((d) => d.toJS() as Rendered | null)
    .find((m) => m?.kind === 'Deployment');
  const containers = deployment?.spec?.template?.spec?.containers ?? [];
  const portal = containers.find((c) => c.name === 'portal') ?? containers[0];
  if (portal === undefined) throw new Error('helm template rendered no Deployment container for portal');
  const value = portal.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
  return value === undefined ? {} : { NODE_OPTIONS: value };
}
