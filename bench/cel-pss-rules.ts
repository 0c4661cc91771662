/**
 * The 19 Pod Security Standards controls as Portal CEL rules (`validate.cel`),
 * named like the JSON Schema rules in policies/pod-security. Written for the
 * CEL benchmark: same checks, same Pod, so the time per evaluation of the two
 * languages compares. (The shipped CEL library is policies/pod-security-vap.)
 */
import type { PortalRuleObject } from '../src/policy/index.ts';

const ALL = 'object.spec.containers + object.spec.?initContainers.orValue([]) + object.spec.?ephemeralContainers.orValue([])';

const RULES: Record<string, string[]> = {
  'disallow-host-namespaces': ['!object.spec.?hostNetwork.orValue(false) && !object.spec.?hostPID.orValue(false) && !object.spec.?hostIPC.orValue(false)'],
  'disallow-privileged-containers': ['variables.all.all(c, !c.?securityContext.?privileged.orValue(false))'],
  'disallow-capabilities': [
    "variables.all.all(c, c.?securityContext.?capabilities.?add.orValue([]).all(a, a in ['AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT']))",
  ],
  'disallow-host-path': ['object.spec.?volumes.orValue([]).all(v, !has(v.hostPath))'],
  'disallow-host-ports': ['variables.all.all(c, c.?ports.orValue([]).all(p, p.?hostPort.orValue(0) == 0))'],
  'disallow-host-process': [
    '!object.spec.?securityContext.?windowsOptions.?hostProcess.orValue(false) && variables.all.all(c, !c.?securityContext.?windowsOptions.?hostProcess.orValue(false))',
  ],
  'restrict-apparmor-profiles': [
    "object.spec.?securityContext.?appArmorProfile.?type.orValue('RuntimeDefault') in ['RuntimeDefault', 'Localhost'] && variables.all.all(c, c.?securityContext.?appArmorProfile.?type.orValue('RuntimeDefault') in ['RuntimeDefault', 'Localhost'])",
    "object.metadata.?annotations.orValue({}).all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/') || object.metadata.annotations[k] == 'runtime/default' || object.metadata.annotations[k].startsWith('localhost/'))",
  ],
  'disallow-selinux': [
    "[object.spec.?securityContext.?seLinuxOptions.orValue({})].all(o, o.?type.orValue('') in ['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'] && !has(o.user) && !has(o.role))",
    "variables.all.all(c, [c.?securityContext.?seLinuxOptions.orValue({})].all(o, o.?type.orValue('') in ['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'] && !has(o.user) && !has(o.role)))",
  ],
  'disallow-proc-mount': ["object.spec.?hostUsers.orValue(true) == false || variables.all.all(c, c.?securityContext.?procMount.orValue('Default') == 'Default')"],
  'disallow-proc-mount-strict': ["variables.all.all(c, c.?securityContext.?procMount.orValue('Default') == 'Default')"],
  'disallow-host-probes': [
    "variables.all.all(c, [c.?livenessProbe, c.?readinessProbe, c.?startupProbe, c.?lifecycle.?postStart, c.?lifecycle.?preStop].all(h, h.?httpGet.?host.orValue('') == '' && h.?tcpSocket.?host.orValue('') == ''))",
  ],
  'restrict-seccomp': [
    "object.spec.?securityContext.?seccompProfile.?type.orValue('') != 'Unconfined' && variables.all.all(c, c.?securityContext.?seccompProfile.?type.orValue('') != 'Unconfined')",
  ],
  'restrict-sysctls': [
    "object.spec.?securityContext.?sysctls.orValue([]).all(s, s.name in ['kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.ip_unprivileged_port_start', 'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_local_reserved_ports', 'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes'])",
  ],
  'restrict-volume-types': [
    "object.spec.?volumes.orValue([]).all(v, v.all(k, k in ['name', 'configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']))",
  ],
  'disallow-privilege-escalation': ['variables.all.all(c, c.?securityContext.?allowPrivilegeEscalation.orValue(true) == false)'],
  'require-run-as-nonroot': [
    'variables.all.all(c, c.?securityContext.?runAsNonRoot.orValue(object.spec.?securityContext.?runAsNonRoot.orValue(false)) == true)',
  ],
  'require-run-as-non-root-user': [
    'object.spec.?securityContext.?runAsUser.orValue(1) != 0 && variables.all.all(c, c.?securityContext.?runAsUser.orValue(1) != 0)',
  ],
  'restrict-seccomp-strict': [
    "variables.all.all(c, c.?securityContext.?seccompProfile.?type.orValue(object.spec.?securityContext.?seccompProfile.?type.orValue('')) in ['RuntimeDefault', 'Localhost'])",
  ],
  'disallow-capabilities-strict': [
    "variables.all.all(c, 'ALL' in c.?securityContext.?capabilities.?drop.orValue([]) && c.?securityContext.?capabilities.?add.orValue([]).all(a, a == 'NET_BIND_SERVICE'))",
  ],
};

export function celPssRules(): PortalRuleObject[] {
  return Object.entries(RULES).map(([name, expressions]) => ({
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name },
    spec: {
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
      validate: {
        cel: {
          variables: [{ name: 'all', expression: ALL }],
          expressions: expressions.map((expression) => ({ expression })),
        },
      },
    },
  }));
}
