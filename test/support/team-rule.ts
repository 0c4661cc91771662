/** A small Deny rule as a policy file's text: Pods need a `team` label (the offline CLI's hostile tests load it beside their input). */
export const TEAM_RULE = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: require-team}
spec:
  enforcement: Deny
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
  validate:
    message: Pods need a team label.
    schema: {required: [metadata], properties: {metadata: {required: [labels], properties: {labels: {required: [team]}}}}}
`;
