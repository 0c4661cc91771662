/**
 * `promtool test rules` cases for the chart's alerts (charts/portal/files/monitoring/alerts.yaml):
 * for each alert, input series that make it fire, and later resolve.
 * `annotations` are the rendered rule's, by alert (the expected alert carries them).
 */
type Annotations = Record<string, Record<string, string>>;

interface AlertTest {
  interval: string;
  input_series: { series: string; values: string }[];
  alert_rule_test: { eval_time: string; alertname: string; exp_alerts: { exp_labels: Record<string, string>; exp_annotations?: Record<string, string> }[] }[];
}

/** The annotations with the templates filled in as promtool renders them for these series. */
function expected(annotations: Annotations, alert: string, summary: string): Record<string, string> {
  return { ...annotations[alert], summary };
}

export function alertTests(a: Annotations): AlertTest[] {
  const fires = (alert: string, at: string, labels: Record<string, string>, summary: string) => ({ eval_time: at, alertname: alert, exp_alerts: [{ exp_labels: labels, exp_annotations: expected(a, alert, summary) }] });
  const resolved = (alert: string, at: string) => ({ eval_time: at, alertname: alert, exp_alerts: [] });
  return [
    {
      interval: '1m',
      // Every request between 1 s and 2.5 s for 30 minutes, then all under 1 s.
      input_series: [
        { series: 'portal_admission_request_duration_seconds_bucket{le="1",instance="a"}', values: '0x30 0+10x30' },
        { series: 'portal_admission_request_duration_seconds_bucket{le="2.5",instance="a"}', values: '0+10x60' },
        { series: 'portal_admission_request_duration_seconds_bucket{le="+Inf",instance="a"}', values: '0+10x60' },
      ],
      alert_rule_test: [fires('PortalWebhookSlow', '20m', { severity: 'warning' }, 'Portal\'s admission p99 is 2.485s (over 1 s).'), resolved('PortalWebhookSlow', '50m')],
    },
    {
      interval: '1m',
      input_series: [{ series: 'portal_ready{instance="a"}', values: '0x20 1x20' }],
      alert_rule_test: [fires('PortalReplicaNotReady', '10m', { severity: 'warning', instance: 'a' }, 'Portal replica a has not been ready for 5 minutes.'), resolved('PortalReplicaNotReady', '30m')],
    },
    {
      interval: '1m',
      input_series: [{ series: 'portal_rule_evaluation_errors_total{rule="typo",path="admission",instance="a"}', values: '0+1x30 30x30' }],
      alert_rule_test: [fires('PortalRuleEvaluationErrors', '20m', { severity: 'warning', rule: 'typo' }, 'Rule typo gives error verdicts.'), resolved('PortalRuleEvaluationErrors', '50m')],
    },
    {
      interval: '1m',
      input_series: [
        { series: 'portal_leader_is_leader{instance="a"}', values: '0x20 1x20' },
        { series: 'portal_leader_is_leader{instance="b"}', values: '0x40' },
      ],
      alert_rule_test: [fires('PortalNoLeader', '10m', { severity: 'warning' }, 'No Portal replica leads; the audit\'s reports and actions are paused.'), resolved('PortalNoLeader', '30m')],
    },
    {
      interval: '1m',
      input_series: [
        { series: 'portal_audit_queue_retries_total{queue="reports",instance="a"}', values: '0+1x30 30x40' },
        { series: 'portal_audit_queue_drops_total{queue="reports",reason="max_retries",instance="a"}', values: '0x70' },
      ],
      alert_rule_test: [fires('PortalReportWritesFailing', '25m', { severity: 'warning' }, 'Portal\'s report writes keep failing (retried or dropped).'), resolved('PortalReportWritesFailing', '60m')],
    },
    {
      interval: '1m',
      input_series: [{ series: 'portal_readiness_error_gate_tripped{instance="a"}', values: '1x10 0x10' }],
      alert_rule_test: [fires('PortalErrorGateTripped', '5m', { severity: 'critical', instance: 'a' }, 'Portal replica a is not ready because of internal errors.'), resolved('PortalErrorGateTripped', '15m')],
    },
  ];
}
