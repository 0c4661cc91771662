{{/* Chart name, overridable. */}}
{{- define "portal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name, used for every namespaced object and for the
cluster-scoped ones (prefixed so two releases never collide). Truncated to 63
characters because some Kubernetes name fields are limited by the DNS spec.
*/}}
{{- define "portal.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "portal.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "portal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "portal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "portal.labels" -}}
helm.sh/chart: {{ include "portal.chart" . }}
{{ include "portal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: portal
{{- end }}

{{- define "portal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "portal.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "portal.tlsSecretName" -}}
{{- printf "%s-tls" (include "portal.fullname" .) }}
{{- end }}

{{- define "portal.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
Resources the webhook must never intercept (docs/design.md §3, self-lockout):
the control plane and Portal itself must always be able to recover.
*/}}
{{- define "portal.forbiddenWebhookResources" -}}
leases events nodes tokenreviews subjectaccessreviews selfsubjectaccessreviews localsubjectaccessreviews portalrules portalclusterrules portalexceptions validatingwebhookconfigurations mutatingwebhookconfigurations
{{- end }}

{{/*
Anti-affinity mode. `auto` looks the nodes up at install/upgrade time: with at
least 2 schedulable nodes (not cordoned, no NoSchedule/NoExecute taint) the
replicas are required to land on different nodes, otherwise it is only
preferred so a single-node cluster still schedules them. `helm template`
without a cluster sees no nodes and renders `preferred`.
*/}}
{{- define "portal.antiAffinityMode" -}}
{{- $mode := .Values.affinity.podAntiAffinity.mode }}
{{- if eq $mode "auto" }}
{{- $schedulable := 0 }}
{{- $nodes := lookup "v1" "Node" "" "" }}
{{- range (get $nodes "items" | default list) }}
{{- $blocked := .spec.unschedulable | default false }}
{{- range (.spec.taints | default list) }}
{{- if or (eq .effect "NoSchedule") (eq .effect "NoExecute") }}{{ $blocked = true }}{{ end }}
{{- end }}
{{- if not $blocked }}{{ $schedulable = add1 $schedulable }}{{ end }}
{{- end }}
{{- if ge (int $schedulable) 2 }}required{{ else }}preferred{{ end }}
{{- else }}
{{- $mode }}
{{- end }}
{{- end }}

{{/*
V8 heap cap in MiB: 75% of the container memory limit (the rest is stacks,
buffers and native memory), or 0 when no
limit is set (then NODE_OPTIONS is not set). Understands Mi and Gi limits.
*/}}
{{- define "portal.heapMiB" -}}
{{- $limit := "" }}
{{- with .Values.resources }}{{ with .limits }}{{ $limit = toString (.memory | default "") }}{{ end }}{{ end }}
{{- $mib := 0 }}
{{- if hasSuffix "Gi" $limit }}{{ $mib = mul (trimSuffix "Gi" $limit | int) 1024 }}
{{- else if hasSuffix "Mi" $limit }}{{ $mib = trimSuffix "Mi" $limit | int }}
{{- end }}
{{- div (mul $mib 3) 4 }}
{{- end }}

{{/*
V8's semi-space cap in MiB, set beside the heap cap. Without it V8 sizes
the young generation from the old-space cap: with --max-old-space-size=384
it let each semi-space grow to 64 MiB under admission load, so a 512Mi
replica's V8 heap limit (576 MiB) exceeded the container's, its RSS reached
~390 MiB, and major collections ran several times as often (concurrent
marking 6-10 us of CPU per review on one core against ~4 with 16 MiB;
docs/benchmarks.md, "Session 12").
*/}}
{{- define "portal.semiSpaceMiB" -}}16{{- end }}
