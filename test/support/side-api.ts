/**
 * The embedded API server's side API (`/_portal/...`) as `portal dev` serves
 * it: HTTPS with its own CA and the admin token, both read from the
 * kubeconfig dev writes (so tests trust exactly that CA, nothing wider).
 */
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { DevApiClient } from '../../packages/devcluster/src/dev/api-client.ts';

interface Kubeconfig {
  clusters?: { cluster?: { server?: string; 'certificate-authority-data'?: string } }[];
  users?: { user?: { token?: string } }[];
}

/** A client for the cluster of `kubeconfigPath` (a `portal dev` kubeconfig). */
export async function sideApi(kubeconfigPath: string): Promise<DevApiClient> {
  const kc = parse(await readFile(kubeconfigPath, 'utf8')) as Kubeconfig;
  const cluster = kc.clusters?.[0]?.cluster;
  const server = cluster?.server;
  if (!server) throw new Error(`${kubeconfigPath}: no cluster server`);
  const caData = cluster['certificate-authority-data'];
  const ca = caData ? Buffer.from(caData, 'base64').toString('utf8') : undefined;
  return new DevApiClient(server, kc.users?.[0]?.user?.token ?? '', ca);
}

/** GET a side-API path; throws unless it answers 200. */
export async function sideGet<T>(api: DevApiClient, path: string): Promise<T> {
  const res = await api.request('GET', path);
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as T;
}
