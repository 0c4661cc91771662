/**
 * `portal dev` (docs/design.md §6): the embedded API server on loopback, the CRDs,
 * the rules, the webhook configuration (built from the chart's values by the
 * same builder as the chart), and N `portal serve` replicas supervised like a
 * Deployment, with a live status line and `.portal/dev/state.json`.
 *
 * kube-apiserver calls ONE endpoint per webhook; here the webhook is a
 * service reference (`portal-webhook.portal-system.svc:443`, the name in the
 * serving certificate) and the admission chain's `resolveService`
 * round-robins over the ready replicas' webhook ports, like a Service's
 * endpoints. With no replica ready it falls back to the running ones (which
 * answer "not ready", i.e. deny: fail closed), then to any.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import { generateCA, generateServingCert, buildValidatingWebhookConfiguration, loadChartWebhookValues, type WebhookValues, RULE_FILE_LIMITS, portalKindResources, ErrorCode, isPortalError, toError, LogKey } from 'portal/dev-api';
import { startApiServer, type ApiServer } from '../apiserver/index.ts';
import { createWebhookAdmission, type WebhookAdmission } from '../webhook-admission.ts';
import { DevApiClient } from './api-client.ts';
import { rbacForReplicas } from './chart-rbac.ts';
import { CHART_CRD_DIRS, readManifests, type Manifest } from './manifests.ts';
import { INSTALL_NAMESPACE, replicasWriteDenialEvents, type DevOptions } from './options.ts';
import { freePort } from './ports.ts';
import { removeState, writeState, type DevState } from './state.ts';
import { listRuleProblems, localProblems, mergeProblems, problemNote, problemReport, type RuleProblem } from './rule-problems.ts';
import { clock, CounterTotals, formatStatus, probeReplica } from './status.ts';
import { kubectlHint } from './tools.ts';
import { Supervisor, type ReplicaSpec, type ReplicaState } from './supervisor.ts';

/** The Service name replicas are reached through (and the certificate's DNS name). */
export const WEBHOOK_SERVICE = 'portal-webhook';
/** Port of that Service, as in the chart (service.port). */
const WEBHOOK_SERVICE_PORT = 443;
const WEBHOOK_CONFIGURATION_NAME = 'portal';
const NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease', INSTALL_NAMESPACE];
const RULE_KINDS = ['PortalRule', 'PortalClusterRule'];
/**
 * ValidatingAdmissionPolicies (and their bindings) under --policies are not
 * installed: the default policies/ holds the Pod Security Standards both as
 * Portal rules and as VAPs (policies/pod-security-vap), and installing both
 * would enforce every control twice, with the VAP's message first. The
 * embedded API server enforces VAPs applied with kubectl (docs/vap.md).
 */
const VAP_KINDS = ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'];
/** The status line refreshes this often. */
const STATUS_INTERVAL_MS = 1000;

export interface DevRuntime {
  /** The Node binary (process.execPath). */
  nodePath: string;
  /** Its version (process.version), shown at start-up: npm scripts run node_modules/.bin/node, not the PATH's (ADR 0008). */
  nodeVersion?: string;
  /** bin/portal.js of this package. */
  script: string;
  /** Environment the replicas inherit (POD_NAME/POD_NAMESPACE are set on top). */
  env: Record<string, string | undefined>;
  /** Where human output and the status line go. */
  out: { write(text: string): unknown; isTTY?: boolean };
}

export type DevResult = { code: 0 } | { code: 1 | 2; message: string };

interface Prepared {
  crds: Manifest[];
  rules: Manifest[];
  webhookValues: WebhookValues;
}

/** Everything that can be wrong in the inputs, found before anything starts. */
async function prepare(o: DevOptions): Promise<Prepared | { problems: string[] }> {
  const problems: string[] = [];
  const read = await readManifests(o.policies, [...RULE_KINDS, ...VAP_KINDS], RULE_FILE_LIMITS);
  // The directory itself is named as the flag it was given to; a file in it by its own path.
  const flagged = (flag: string, dir: string) => (p: string) => (p.startsWith(`${dir}: `) ? `${flag} ${p}` : p);
  problems.push(...read.problems.map(flagged('--policies', o.policies)));
  const rules = { objects: read.objects.filter((x) => RULE_KINDS.includes(x.kind)) };
  const crds: Manifest[] = [];
  for (const dir of CHART_CRD_DIRS.map((sub) => join(o.chart, sub))) {
    const r = await readManifests(dir, ['CustomResourceDefinition']);
    crds.push(...r.objects);
    problems.push(...r.problems.map(flagged('--chart', dir)));
  }
  let webhookValues: WebhookValues | undefined;
  try {
    webhookValues = await loadChartWebhookValues(o.chart);
  } catch (err) {
    problems.push(`--chart: ${(err as Error).message}`);
  }
  if (problems.length > 0 || !webhookValues) return { problems };
  return { crds, rules: rules.objects, webhookValues };
}

/** Where the replicas' serving certificate and the CA that signed it are written. */
interface Certs { ca: string; cert: string; key: string; caPem: string }

/**
 * Certificates: a fresh CA per run; the serving cert names the Service (what
 * the API server verifies) and loopback (for curl and tests).
 */
async function writeCertificates(dir: string): Promise<Certs> {
  const ca = await generateCA('portal-dev-ca');
  const serving = await generateServingCert(ca, [`${WEBHOOK_SERVICE}.${INSTALL_NAMESPACE}.svc`, 'localhost'], ['127.0.0.1']);
  const certs = { ca: join(dir, 'ca.crt'), cert: join(dir, 'tls.crt'), key: join(dir, 'tls.key'), caPem: ca.cert };
  await writeFile(certs.ca, ca.cert);
  await writeFile(certs.cert, serving.cert);
  await writeFile(certs.key, serving.key, { mode: 0o600 });
  return certs;
}

/**
 * What a Helm install of the chart creates, applied to the embedded cluster:
 * the replicas' ServiceAccounts and RBAC (what production gives them, no
 * more), the CRDs, the rules (a PortalRule without a namespace goes to
 * `default`, as kubectl would put it), the Service and the webhook
 * configuration. Returns the rules as installed.
 */
async function install(client: DevApiClient, prepared: Prepared, replicas: readonly string[], caPem: string, o: DevOptions): Promise<Manifest[]> {
  for (const obj of rbacForReplicas(replicas, { denialEvents: replicasWriteDenialEvents(o.passthrough) })) await client.apply(obj);
  for (const crd of prepared.crds) await client.apply(crd);
  const installed: Manifest[] = prepared.rules.map((rule) => (rule.kind === 'PortalRule' ? { ...rule, metadata: { ...rule.metadata, namespace: rule.metadata.namespace ?? 'default' } } : rule));
  for (const rule of installed) await client.apply(rule);
  await client.apply({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: WEBHOOK_SERVICE, namespace: INSTALL_NAMESPACE, labels: { 'app.kubernetes.io/name': 'portal' } },
    spec: { type: 'ClusterIP', selector: { 'app.kubernetes.io/name': 'portal' }, ports: [{ name: 'webhook', port: WEBHOOK_SERVICE_PORT, targetPort: 'webhook', protocol: 'TCP' }] },
  });
  await client.apply(
    buildValidatingWebhookConfiguration({
      name: WEBHOOK_CONFIGURATION_NAME,
      namespace: INSTALL_NAMESPACE,
      caBundle: Buffer.from(caPem).toString('base64'),
      clientConfig: { service: { name: WEBHOOK_SERVICE, namespace: INSTALL_NAMESPACE, port: WEBHOOK_SERVICE_PORT, path: prepared.webhookValues.path } },
      values: prepared.webhookValues,
      portalKindResources: portalKindResources(),
    }),
  );
  return installed;
}

/** One `portal serve` per replica, each with its own identity (bound to the chart's roles by rbacForReplicas), kubeconfig and ports. */
async function replicaSpecs(api: ApiServer, names: readonly string[], certs: Certs, dirs: { logs: string; replicas: string }, o: DevOptions, rt: DevRuntime, webhookValues: WebhookValues): Promise<ReplicaSpec[]> {
  const specs: ReplicaSpec[] = [];
  for (const name of names) {
    const user = `system:serviceaccount:${INSTALL_NAMESPACE}:${name}`;
    api.addUser(user, ['system:serviceaccounts', `system:serviceaccounts:${INSTALL_NAMESPACE}`, 'system:authenticated']);
    const kubeconfig = join(dirs.replicas, `${name}.kubeconfig`);
    await writeFile(kubeconfig, api.kubeConfig(user), { mode: 0o600 });
    const p = { webhook: await freePort(), probes: await freePort() };
    specs.push({
      name,
      webhookPort: p.webhook,
      probesPort: p.probes,
      logFile: join(dirs.logs, `${name}.log`),
      env: { ...definedEnv(rt.env), POD_NAME: name, POD_NAMESPACE: INSTALL_NAMESPACE, KUBECONFIG: kubeconfig },
      args: [
        'serve',
        '--kubeconfig', kubeconfig,
        '--tls-cert-file', certs.cert,
        '--tls-key-file', certs.key,
        '--webhook-port', String(p.webhook),
        '--probes-port', String(p.probes),
        '--bind-address', '127.0.0.1',
        '--install-namespace', INSTALL_NAMESPACE,
        '--webhook-configuration', WEBHOOK_CONFIGURATION_NAME,
        '--pod-name', name,
        // The webhook configuration's timeoutSeconds, which bounds how long a request may take to arrive.
        '--webhook-timeout', `${webhookValues.timeoutSeconds}s`,
        ...o.passthrough,
      ],
    });
  }
  return specs;
}

/**
 * The Service's endpoints for the admission chain: round-robin over the
 * ready replicas' webhook ports; with none ready, the running ones (which
 * answer "not ready", i.e. deny: fail closed), then any.
 */
function serviceResolver(endpoints: { supervisor?: Supervisor }, ready: ReadonlySet<string>): (ns: string, name: string, port: number) => string {
  let rr = 0;
  return (ns, name, port) => {
    const states = endpoints.supervisor?.states() ?? [];
    if (ns !== INSTALL_NAMESPACE || name !== WEBHOOK_SERVICE || states.length === 0) return `${name}.${ns}.svc:${port}`;
    const running = states.filter((s) => s.running);
    const healthy = running.filter((s) => ready.has(s.name));
    const pool = healthy.length > 0 ? healthy : running.length > 0 ? running : states;
    const pick = pool[rr++ % pool.length] as ReplicaState;
    return `127.0.0.1:${pick.webhookPort}`;
  };
}

/**
 * The status line, every STATUS_INTERVAL_MS until `signal` aborts: probes
 * every replica (keeping `ready` current for the resolver) and lists the
 * rules that are not Ready or not covered whenever that set changes. The
 * rules from --policies that will not compile are known at once (the
 * RuleSet's own words): said now, and standing in for each such rule until
 * the leader has written its status.
 */
function statusLine(sup: Supervisor, client: DevApiClient, installed: readonly Manifest[], ready: Set<string>, apiUrl: string, out: DevRuntime['out'], signal: AbortSignal): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let last = '';
  const totals = new CounterTotals();
  const local = localProblems(installed);
  let problems: RuleProblem[] = local;
  const first = problemReport([], local);
  if (first.length > 0) out.write(`${first.join('\n')}\n`);
  const tick = async (): Promise<void> => {
    const [statuses, rules] = await Promise.all([
      Promise.all(sup.states().map(async (s) => totals.add(await probeReplica({ name: s.name, probesPort: s.probesPort, running: s.running }), s.pid))),
      listRuleProblems(client),
    ]);
    if (signal.aborted) return;
    for (const s of statuses) {
      if (s.ready) ready.add(s.name);
      else ready.delete(s.name);
    }
    const now = rules ? mergeProblems(rules, local) : undefined;
    const report = now ? problemReport(problems, now) : [];
    if (now) problems = now;
    if (report.length > 0) out.write(`${out.isTTY ? '\r\x1b[2K' : ''}${report.join('\n')}\n`);
    const line = formatStatus(apiUrl, statuses) + problemNote(problems);
    // The time it was printed: on a terminal the line is redrawn every tick; in a log, a line is
    // written only when what it says changes (the time alone is no change).
    if (out.isTTY) out.write(`\r\x1b[2K${clock(new Date())} ${line}`);
    else if (line !== last) out.write(`${clock(new Date())} ${line}\n`);
    last = line;
  };
  const loop = (): void => {
    timer = setTimeout(() => {
      tick().finally(() => {
        if (!signal.aborted) loop();
      }).catch(() => undefined);
    }, STATUS_INTERVAL_MS);
  };
  loop();
  return { stop: () => clearTimeout(timer) };
}

/** `.portal/dev/state.json`, rewritten in order on every change of the replicas, until `signal` aborts. */
function stateWriter(file: string, run: { kubeconfig: string; apiserver: string; webhookPath: string }, signal: AbortSignal, logger: Logger): { save(states: ReplicaState[]): void; written(): Promise<void> } {
  let writing = Promise.resolve();
  return {
    save(states) {
      const state: DevState = {
        kubeconfig: run.kubeconfig,
        apiserver: run.apiserver,
        replicas: states.map((s) => ({
          name: s.name,
          pid: s.pid ?? null,
          webhook: `https://127.0.0.1:${s.webhookPort}${run.webhookPath}`,
          probes: `http://127.0.0.1:${s.probesPort}`,
        })),
      };
      writing = writing.then(() => (signal.aborted ? undefined : writeState(file, state))).catch((err: unknown) => {
        logger.error({ [LogKey.error]: toError(err) }, 'cannot write state.json');
      });
    },
    written: () => writing,
  };
}

/** What `portal dev` says once the cluster is up: where it is, what runs the replicas, where kubectl and the logs are. */
function banner(rt: DevRuntime, at: { apiUrl: string; adminKubeconfig: string; logs: string; stateFile: string }): string {
  return (
    `portal dev: API server ${at.apiUrl}\n` +
    (rt.nodeVersion !== undefined ? `portal dev: replicas run Node ${rt.nodeVersion} (${rt.nodePath})\n` : '') +
    `portal dev: ${kubectlHint()}\n` +
    `portal dev: kubectl --kubeconfig ${at.adminKubeconfig} get pods -A\n` +
    `portal dev: logs in ${at.logs}, state in ${at.stateFile}\n`
  );
}

export async function runDev(options: DevOptions, rt: DevRuntime, signal: AbortSignal): Promise<DevResult> {
  const o: DevOptions = { ...options, stateDir: resolve(options.stateDir), policies: resolve(options.policies), chart: resolve(options.chart) };
  const prepared = await prepare(o);
  if ('problems' in prepared) return { code: 2, message: prepared.problems.join('\n') };

  const dirs = { certs: join(o.stateDir, 'certs'), logs: join(o.stateDir, 'logs'), replicas: join(o.stateDir, 'replicas') };
  await Promise.all(Object.values(dirs).map((d) => mkdir(d, { recursive: true })));
  const logger: Logger = pino({ level: 'info', timestamp: pino.stdTimeFunctions.isoTime }, pino.destination({ dest: join(dirs.logs, 'dev.log'), sync: true }));
  const stateFile = join(o.stateDir, 'state.json');
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  let fatal: DevResult | undefined;

  let api: ApiServer | undefined;
  let admission: WebhookAdmission | undefined;
  let status: { stop(): void } | undefined;
  const ready = new Set<string>();
  // The admission chain is created before the supervisor it asks for endpoints.
  const endpoints: { supervisor?: Supervisor } = {};
  try {
    // The API server's port first: a taken port is the commonest start-up
    // failure, and it must be reported at once, before certificates or
    // anything else is made (and with nothing left running).
    admission = createWebhookAdmission({ logger: logger.child({ [LogKey.component]: 'admission-chain' }), resolveService: serviceResolver(endpoints, ready) });
    api = await startApiServer({ port: o.port, plainHttp: false, admission, logger: logger.child({ [LogKey.component]: 'apiserver' }), namespaces: NAMESPACES, controllers: true, authorization: 'RBAC' });
    const certs = await writeCertificates(dirs.certs);
    const names = Array.from({ length: o.replicas }, (_, i) => `portal-${i}`);
    const adminKubeconfig = join(o.stateDir, 'kubeconfig');
    await writeFile(adminKubeconfig, api.kubeConfig('admin'), { mode: 0o600 });
    const client = new DevApiClient(api.url, api.adminToken, api.caCert);
    const installed = await install(client, prepared, names, certs.caPem, o);
    const specs = await replicaSpecs(api, names, certs, dirs, o, rt, prepared.webhookValues);

    const apiUrl = api.url;
    const state = stateWriter(stateFile, { kubeconfig: adminKubeconfig, apiserver: apiUrl, webhookPath: prepared.webhookValues.path }, stop.signal, logger);
    const supervisor = new Supervisor({
      nodePath: rt.nodePath,
      script: rt.script,
      replicas: specs,
      gracePeriodMs: o.gracePeriodMs,
      logger: logger.child({ [LogKey.component]: 'supervisor' }),
      onChange: (states) => {
        for (const s of states) if (!s.running) ready.delete(s.name);
        state.save(states);
      },
      onFatal: (name, tail) => {
        fatal = { code: 2, message: `replica ${name} rejected its configuration (exit code 2); its log ends with:\n${tail}` };
        stop.abort();
      },
    });

    rt.out.write(banner(rt, { apiUrl, adminKubeconfig, logs: dirs.logs, stateFile }));
    endpoints.supervisor = supervisor;
    status = statusLine(supervisor, client, installed, ready, apiUrl, rt.out, stop.signal);
    await supervisor.start(stop.signal);
    await state.written();
    if (rt.out.isTTY) rt.out.write('\n');
    return fatal ?? { code: 0 };
  } catch (err) {
    logger.error({ [LogKey.error]: toError(err) }, 'portal dev failed');
    // A taken port is a usage problem (exit 2), like a bad flag.
    if (isPortalError(err, ErrorCode.ConfigInvalid)) return fatal ?? { code: 2, message: err.message };
    return fatal ?? { code: 1, message: (err as Error).message };
  } finally {
    signal.removeEventListener('abort', onAbort);
    stop.abort();
    status?.stop();
    admission?.close();
    await api?.close();
    await removeState(stateFile);
    if (api) rt.out.write('portal dev: stopped\n');
    logger.flush();
  }
}

function definedEnv(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  return out;
}

/** For tests and tools: the state file of a running `portal dev`. */
export async function readDevState(stateDir: string): Promise<DevState | undefined> {
  try {
    return JSON.parse(await readFile(join(stateDir, 'state.json'), 'utf8')) as DevState;
  } catch {
    return undefined;
  }
}
