/**
 * Regenerates policies/pod-security-vap/ from policies/pod-security/ (names, messages,
 * severity, category, enforcement → binding action) and the CEL of each control below.
 * Run: npx tsx test/pss/generate-vap-library.ts "$PWD"; test/pss/vap-parity.test.ts checks the result.
 */
import { readFileSync, writeFileSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';

const ROOT = process.argv[2] as string;
const SRC = join(ROOT, 'policies/pod-security');
const OUT = join(ROOT, 'policies/pod-security-vap');
mkdirSync(OUT, { recursive: true });

const C = 'variables.containers';
const PS = 'variables.podSpec';
const notWin = `${PS}.?os.?name.orValue('') == 'windows' || `;
const BASE_CAPS = ['AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'];
const SYSCTLS = [
  'kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes',
  'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem',
  'net.ipv4.tcp_slow_start_after_idle', 'net.ipv4.tcp_notsent_lowat',
];
const VOLUMES = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'image', 'persistentVolumeClaim', 'projected', 'secret'];
const list = (xs: string[]): string => `[${xs.map((x) => `'${x}'`).join(', ')}]`;
const userns = `${PS}.?hostUsers.orValue(true) == false`;

const CONTROLS: Record<string, { expression: string; comment: string; needsMeta?: boolean }> = {
  'disallow-privileged-containers': {
    comment: 'Baseline "Privileged Containers" (1.0): securityContext.privileged unset or false in every container.',
    expression: `${C}.all(c, !c.?securityContext.?privileged.orValue(false))`,
  },
  'disallow-host-namespaces': {
    comment: 'Baseline "Host Namespaces" (1.0): hostNetwork, hostPID and hostIPC unset or false.',
    expression: `!${PS}.?hostNetwork.orValue(false) && !${PS}.?hostPID.orValue(false) && !${PS}.?hostIPC.orValue(false)`,
  },
  'disallow-host-path': {
    comment: 'Baseline "HostPath Volumes" (1.0): no hostPath volume.',
    expression: `${PS}.?volumes.orValue([]).all(v, !has(v.hostPath))`,
  },
  'disallow-host-ports': {
    comment: 'Baseline "Host Ports" (1.0): ports[*].hostPort unset or 0 in every container.',
    expression: `${C}.all(c, c.?ports.orValue([]).all(p, p.?hostPort.orValue(0) == 0))`,
  },
  'disallow-host-process': {
    comment: 'Baseline "HostProcess" (1.0): windowsOptions.hostProcess unset or false, pod level and every container.',
    expression: `!${PS}.?securityContext.?windowsOptions.?hostProcess.orValue(false) && ${C}.all(c, !c.?securityContext.?windowsOptions.?hostProcess.orValue(false))`,
  },
  'disallow-capabilities': {
    comment: 'Baseline "Capabilities" (1.0): capabilities.add only from the 13 default container runtime capabilities.',
    expression: `${C}.all(c, c.?securityContext.?capabilities.?add.orValue([]).all(a, a in ${list(BASE_CAPS)}))`,
  },
  'restrict-apparmor-profiles': {
    comment: 'Baseline "AppArmor" (1.0): appArmorProfile unset or of type RuntimeDefault or Localhost; the beta annotations "", runtime/default or localhost/*.',
    needsMeta: true,
    expression:
      `variables.podMeta.?annotations.orValue({}).all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/') || ` +
      `variables.podMeta.annotations[k] in ['', 'runtime/default'] || variables.podMeta.annotations[k].startsWith('localhost/')) && ` +
      `[${PS}.?securityContext.orValue({})].all(sc, !sc.?appArmorProfile.hasValue() || sc.appArmorProfile.?type.orValue('') in ['RuntimeDefault', 'Localhost']) && ` +
      `${C}.all(c, !c.?securityContext.?appArmorProfile.hasValue() || c.securityContext.appArmorProfile.?type.orValue('') in ['RuntimeDefault', 'Localhost'])`,
  },
  'disallow-selinux': {
    comment: 'Baseline "SELinux" (1.31): seLinuxOptions.type "", container_t, container_init_t, container_kvm_t or container_engine_t; user and role empty.',
    expression:
      `[${PS}.?securityContext.?seLinuxOptions.orValue({})].all(o, ` +
      `o.?type.orValue('') in ['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'] && o.?user.orValue('') == '' && o.?role.orValue('') == '') && ` +
      `${C}.all(c, [c.?securityContext.?seLinuxOptions.orValue({})].all(o, ` +
      `o.?type.orValue('') in ['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'] && o.?user.orValue('') == '' && o.?role.orValue('') == ''))`,
  },
  'restrict-seccomp': {
    comment: 'Baseline "Seccomp" (1.19): seccompProfile unset or of type RuntimeDefault or Localhost, pod level and every container.',
    expression:
      `[${PS}.?securityContext.orValue({})].all(sc, !sc.?seccompProfile.hasValue() || sc.seccompProfile.?type.orValue('') in ['RuntimeDefault', 'Localhost']) && ` +
      `${C}.all(c, !c.?securityContext.?seccompProfile.hasValue() || c.securityContext.seccompProfile.?type.orValue('') in ['RuntimeDefault', 'Localhost'])`,
  },
  'restrict-sysctls': {
    comment: 'Baseline "Sysctls" (1.37): only the 14 namespaced, isolated sysctls.',
    expression: `${PS}.?securityContext.?sysctls.orValue([]).all(s, s.?name.orValue('') in ${list(SYSCTLS)})`,
  },
  'disallow-proc-mount': {
    comment: 'Baseline "/proc Mount Type" (1.35): procMount unset or Default; any value in a user-namespaced pod (hostUsers: false).',
    expression: `${userns} || ${C}.all(c, c.?securityContext.?procMount.orValue('Default') == 'Default')`,
  },
  'disallow-host-probes': {
    comment: 'Baseline "Host Probes / Lifecycle Hooks" (1.34): the httpGet and tcpSocket handlers of probes and lifecycle hooks leave host unset or "".',
    expression:
      `${C}.all(c, [c.?livenessProbe, c.?readinessProbe, c.?startupProbe, c.?lifecycle.?postStart, c.?lifecycle.?preStop].all(h, ` +
      `h.?httpGet.?host.orValue('') == '' && h.?tcpSocket.?host.orValue('') == ''))`,
  },
  'disallow-proc-mount-strict': {
    comment: 'Restricted "/proc Mount Type" (1.35): procMount unset or Default in every container, also in user namespaces.',
    expression: `${C}.all(c, c.?securityContext.?procMount.orValue('Default') == 'Default')`,
  },
  'disallow-privilege-escalation': {
    comment: 'Restricted "Privilege Escalation" (1.25): allowPrivilegeEscalation explicitly false in every container; Windows pods exempt.',
    expression: `${notWin}${C}.all(c, c.?securityContext.?allowPrivilegeEscalation.orValue(true) == false)`,
  },
  'disallow-capabilities-strict': {
    comment: 'Restricted "Capabilities" (1.25): every container drops ALL and adds only NET_BIND_SERVICE; Windows pods exempt.',
    expression:
      `${notWin}${C}.all(c, 'ALL' in c.?securityContext.?capabilities.?drop.orValue([]) && ` +
      `c.?securityContext.?capabilities.?add.orValue([]).all(a, a == 'NET_BIND_SERVICE'))`,
  },
  'restrict-seccomp-strict': {
    comment: 'Restricted "Seccomp" (1.25): seccompProfile.type RuntimeDefault or Localhost at pod level, or else in every container; Windows pods exempt.',
    expression:
      `${notWin}([${PS}.?securityContext.orValue({})].all(sc, !sc.?seccompProfile.hasValue() || sc.seccompProfile.?type.orValue('') in ['RuntimeDefault', 'Localhost']) && ` +
      `${C}.all(c, c.?securityContext.?seccompProfile.hasValue() ? c.securityContext.seccompProfile.?type.orValue('') in ['RuntimeDefault', 'Localhost'] : ` +
      `${PS}.?securityContext.?seccompProfile.?type.orValue('') in ['RuntimeDefault', 'Localhost']))`,
  },
  'require-run-as-nonroot': {
    comment: 'Restricted "Running as Non-root" (1.35): runAsNonRoot true at pod level (and never false in a container) or in every container; any value in a user-namespaced pod.',
    expression:
      `${userns} || (${PS}.?securityContext.?runAsNonRoot.orValue(true) != false && ` +
      `${C}.all(c, c.?securityContext.?runAsNonRoot.hasValue() ? c.securityContext.runAsNonRoot == true : ${PS}.?securityContext.?runAsNonRoot.orValue(false) == true))`,
  },
  'require-run-as-non-root-user': {
    comment: 'Restricted "Running as Non-root user" (1.35): runAsUser unset or non-zero, pod level and every container; any value in a user-namespaced pod.',
    expression: `${userns} || (${PS}.?securityContext.?runAsUser.orValue(1) != 0 && ${C}.all(c, c.?securityContext.?runAsUser.orValue(1) != 0))`,
  },
  'restrict-volume-types': {
    comment: 'Restricted "Volume Types" (1.0): only configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim, projected and secret volumes.',
    expression: `${PS}.?volumes.orValue([]).all(v, v.all(k, k in ${list(['name', ...VOLUMES])}))`,
  },
};


const rules = readdirSync(SRC).filter((f) => f.endsWith(".yaml")).map((f) => parse(readFileSync(join(SRC, f), "utf8")) as any); // eslint-disable-line @typescript-eslint/no-explicit-any
for (const rule of rules) {
  const name: string = rule.metadata.name;
  const control = CONTROLS[name];
  if (!control) throw new Error(`no CEL for ${name}`);
  const deny = rule.spec.enforcement === 'Deny';
  const variables = [
    {
      name: 'podSpec',
      expression: "object.kind == 'Pod' ? object.spec : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec : object.spec.template.spec",
    },
    ...(control.needsMeta
      ? [{
          name: 'podMeta',
          expression:
            "object.kind == 'Pod' ? object.metadata : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.?metadata.orValue({}) : object.spec.template.?metadata.orValue({})",
        }]
      : []),
    ...(control.expression.includes('variables.containers')
      ? [{
          name: 'containers',
          expression:
            'variables.podSpec.?containers.orValue([]) + variables.podSpec.?initContainers.orValue([]) + variables.podSpec.?ephemeralContainers.orValue([])',
        }]
      : []),
  ];
  const a = rule.metadata.annotations ?? {};
  const policy = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: {
      name,
      annotations: {
        'policies.portal.dev/title': a['policies.portal.dev/title'],
        'policies.portal.dev/description': a['policies.portal.dev/description'],
        'policies.portal.dev/category': rule.spec.category,
        'policies.portal.dev/severity': rule.spec.severity,
        ...(a['policies.portal.dev/pod-security-check'] ? { 'policies.portal.dev/pod-security-check': a['policies.portal.dev/pod-security-check'] } : {}),
        // VAPs carry no version pinning: every control is the one in force at the latest Pod Security version.
        'policies.portal.dev/pod-security-version': 'latest (v1.37)',
      },
    },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        resourceRules: [
          { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['pods', 'pods/ephemeralcontainers', 'replicationcontrollers'] },
          { apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments', 'replicasets', 'daemonsets', 'statefulsets'] },
          { apiGroups: ['batch'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['jobs', 'cronjobs'] },
        ],
      },
      variables,
      validations: [{ expression: control.expression, message: String(rule.spec.validate.message).trim(), reason: 'Forbidden' }],
    },
  };
  const binding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name },
    spec: { policyName: name, validationActions: deny ? ['Deny'] : ['Warn'] },
  };
  const header = `# Pod Security Standards as a ValidatingAdmissionPolicy: ${control.comment}\n` +
    `# Same name and verdicts as policies/pod-security/${name}.yaml (checked by test/pss/vap-parity.test.ts).\n` +
    `# Pods and the pod templates of Deployment, ReplicaSet, DaemonSet, StatefulSet, ReplicationController, Job and CronJob.\n`;
  writeFileSync(join(OUT, `${name}.yaml`), header + stringify(policy, { lineWidth: 0 }) + '---\n' + stringify(binding, { lineWidth: 0 }));
}
console.log('wrote', rules.length);
