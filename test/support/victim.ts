/**
 * The victim of the hostile end-to-end tests: a tenant who creates Pods
 * through the API server at a steady rate while someone else attacks, and
 * records what it sees (which creates failed, and how long each answer took).
 */
import { readFile } from 'node:fs/promises';
import * as k8s from '@kubernetes/client-node';

export interface VictimResult {
  ok: number;
  /** `name: message` of each create refused or failed. */
  failed: string[];
  /** The time to every answer, success or failure. */
  latenciesMs: number[];
}

export interface VictimOptions {
  namespace: string;
  pod: (name: string) => k8s.V1Pod;
  /** Creates per second. */
  rate: number;
  /** For how long; without, until stop(). */
  seconds?: number;
  /** Pod names are `<prefix>-<i>`; default `victim`. */
  prefix?: string;
}

export interface Victim {
  /** Creates answered so far. */
  answered: () => number;
  /** Every answer, once the last create (of `seconds`, or before stop()) was answered. */
  done: Promise<VictimResult>;
  /** Sends no more creates; resolves as done does. */
  stop: () => Promise<VictimResult>;
}

/** A client for the user of a kubeconfig file. */
export async function coreApi(kubeconfigFile: string): Promise<k8s.CoreV1Api> {
  const kc = new k8s.KubeConfig();
  kc.loadFromString(await readFile(kubeconfigFile, 'utf8'));
  return kc.makeApiClient(k8s.CoreV1Api);
}

/** A Pod every shipped policy admits (policies/), in `namespace`. */
export function compliantPod(name: string, namespace: string): k8s.V1Pod {
  return {
    metadata: { name, namespace, labels: { team: 'platform' } },
    spec: {
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'app',
          image: 'nginx:1.27',
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
          resources: { limits: { cpu: '100m', memory: '64Mi' } },
        },
      ],
    },
  };
}

/** The Status message in a refused create's body (what kubectl prints), else the error itself. */
export function apiMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  try {
    return (JSON.parse(String(body)) as { message?: string }).message ?? String(err);
  } catch {
    return String(body ?? err);
  }
}

/**
 * Creates Pods in `namespace`, one every 1000/`rate` ms (open loop: a slow
 * answer does not slow the rate), for `seconds` or until stop().
 */
export function victim(core: k8s.CoreV1Api, o: VictimOptions): Victim {
  const result: VictimResult = { ok: 0, failed: [], latenciesMs: [] };
  const pending: Promise<void>[] = [];
  const total = o.seconds === undefined ? Infinity : o.rate * o.seconds;
  let stopped = false;
  let wake: (() => void) | undefined;
  const send = (i: number): void => {
    const name = `${o.prefix ?? 'victim'}-${i}`;
    const began = performance.now();
    pending.push(
      core.createNamespacedPod({ namespace: o.namespace, body: o.pod(name) }).then(
        () => {
          result.ok++;
          result.latenciesMs.push(performance.now() - began);
        },
        (err: unknown) => {
          result.failed.push(`${name}: ${apiMessage(err).slice(0, 300)}`);
          result.latenciesMs.push(performance.now() - began);
        },
      ),
    );
  };
  const done = (async () => {
    const start = performance.now();
    for (let i = 0; i < total && !stopped; i++) {
      const wait = start + (i * 1000) / o.rate - performance.now();
      if (wait > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, wait);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      if (!stopped) send(i);
    }
    await Promise.all(pending);
    return result;
  })();
  return {
    answered: () => result.ok + result.failed.length,
    done,
    stop: () => {
      stopped = true;
      wake?.();
      return done;
    },
  };
}

/** The `p`th percentile (nearest rank) of `values`; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
