/**
 * The NODE_OPTIONS the chart's Deployment gives Portal's container at its
 * default values (the V8 heap caps it derives from the memory limit), read
 * from what the real Helm renders (test/chart/helm.ts, as the chart tests
 * do), so a bench side "as deployed" runs with the chart's flags rather
 * than a copy of its formula.
 */
import { find, render } from '../test/chart/helm.ts';

interface PodTemplate {
  template: { spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] } };
}

/** `{NODE_OPTIONS}` as the chart sets it for the `portal` container, or `{}` when it sets none. */
export async function chartNodeOptions(): Promise<{ NODE_OPTIONS?: string }> {
  const containers = (find(await render(), 'Deployment')['spec'] as PodTemplate).template.spec.containers;
  const portal = containers.find((c) => c.name === 'portal');
  if (portal === undefined) throw new Error(`the chart's Deployment has no portal container (it has ${containers.map((c) => c.name).join(', ')})`);
  const value = portal.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
  return value === undefined ? {} : { NODE_OPTIONS: value };
}
