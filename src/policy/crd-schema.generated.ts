// GENERATED from charts/portal/crds/portal.dev_portalclusterrules.yaml by
// `node --import tsx test/policy/generate-crd-schema.ts`. Do not edit by hand:
// edit the CRD manifest and regenerate.

import { CONDITIONS, LABEL_SELECTOR_PROPERTIES } from './crd-shared.generated.ts';

/** The openAPIV3Schema of PortalRule and PortalClusterRule (identical). */
export const RULE_CRD_OPENAPI_SCHEMA: Readonly<Record<string, unknown>> = {
  "description": "A Portal admission and audit rule (docs/design.md §2).",
  "type": "object",
  "required": [
    "spec"
  ],
  "properties": {
    "apiVersion": {
      "type": "string"
    },
    "kind": {
      "type": "string"
    },
    "metadata": {
      "type": "object"
    },
    "spec": {
      "type": "object",
      "required": [
        "match",
        "validate"
      ],
      "properties": {
        "enforcement": {
          "description": "What admission does with a violation. Deny rejects, Warn allows with a warning, Audit only reports.",
          "type": "string",
          "enum": [
            "Deny",
            "Warn",
            "Audit"
          ],
          "default": "Deny"
        },
        "failurePolicy": {
          "description": "What a rule error (never compiled, runtime error, cost or regex budget, deadline) does. Fail treats it as a failure that the enforcement acts on (Deny denies, Warn warns, Audit is silent); Ignore admits. The audit reports error either way.",
          "type": "string",
          "enum": [
            "Fail",
            "Ignore"
          ],
          "default": "Fail"
        },
        "severity": {
          "description": "PolicyReport severity of a violation.",
          "type": "string",
          "enum": [
            "critical",
            "high",
            "medium",
            "low",
            "info"
          ],
          "default": "medium"
        },
        "category": {
          "description": "PolicyReport category (free text).",
          "type": "string",
          "maxLength": 256
        },
        "match": {
          "description": "Which requests and objects the rule looks at.",
          "type": "object",
          "required": [
            "kinds"
          ],
          "properties": {
            "kinds": {
              "type": "array",
              "minItems": 1,
              "items": {
                "type": "object",
                "required": [
                  "apiGroups",
                  "kinds"
                ],
                "properties": {
                  "apiGroups": {
                    "description": "API groups; \"\" is the core group, \"*\" any group.",
                    "type": "array",
                    "minItems": 1,
                    "items": {
                      "type": "string"
                    }
                  },
                  "kinds": {
                    "description": "Kind names; \"*\" is any kind.",
                    "type": "array",
                    "minItems": 1,
                    "items": {
                      "type": "string",
                      "minLength": 1
                    }
                  },
                  "subresources": {
                    "description": "Subresources also matched (status, scale, eviction, ...; \"*\" any). A subresource request is not matched unless named here.",
                    "type": "array",
                    "items": {
                      "type": "string",
                      "minLength": 1
                    }
                  }
                }
              }
            },
            "operations": {
              "description": "Admission operations matched (default CREATE, UPDATE). DELETE validates oldObject.",
              "type": "array",
              "items": {
                "type": "string",
                "enum": [
                  "CREATE",
                  "UPDATE",
                  "DELETE",
                  "CONNECT"
                ]
              }
            },
            "namespaces": {
              "description": "Only these namespaces; a trailing * is a prefix glob.",
              "type": "array",
              "items": {
                "type": "string",
                "minLength": 1
              }
            },
            "excludedNamespaces": {
              "description": "Never these namespaces; a trailing * is a prefix glob.",
              "type": "array",
              "items": {
                "type": "string",
                "minLength": 1
              }
            },
            "namespaceSelector": {
              "description": "Label selector over the labels of the object's namespace.",
              "type": "object",
              "x-kubernetes-map-type": "atomic",
              "properties": LABEL_SELECTOR_PROPERTIES
            },
            "objectSelector": {
              "description": "Label selector over the object's labels (object or oldObject).",
              "type": "object",
              "x-kubernetes-map-type": "atomic",
              "properties": LABEL_SELECTOR_PROPERTIES
            }
          }
        },
        "podTemplates": {
          "description": "For rules that match Pod, also check the pod template of workloads (default true).",
          "type": "boolean"
        },
        "podSecurity": {
          "description": "Pod Security Standards version that the schema's minPodSecurityVersion conditions see (default latest). The namespace label pod-security.kubernetes.io/enforce-version overrides it.",
          "type": "object",
          "properties": {
            "version": {
              "description": "latest or v1.N (e.g. v1.30), as pod-security.kubernetes.io/enforce-version.",
              "type": "string",
              "pattern": "^(latest|v1\\.(0|[1-9][0-9]*))$"
            }
          }
        },
        "validate": {
          "description": "What a compliant object satisfies; give schema, cel or both (both must pass).",
          "type": "object",
          "properties": {
            "message": {
              "description": "Shown to users when the rule is violated.",
              "type": "string",
              "maxLength": 1024
            },
            "schema": {
              "description": "JSON Schema (draft 2020-12) that a compliant object satisfies.",
              "x-kubernetes-preserve-unknown-fields": true
            },
            "cel": {
              "description": "CEL checks in ValidatingAdmissionPolicy syntax (matchConditions, variables, expressions).",
              "type": "object",
              "required": [
                "expressions"
              ],
              "properties": {
                "matchConditions": {
                  "description": "All must be true for the rule to apply; otherwise it is skipped.",
                  "type": "array",
                  "maxItems": 64,
                  "items": {
                    "type": "object",
                    "required": [
                      "name",
                      "expression"
                    ],
                    "properties": {
                      "name": {
                        "type": "string",
                        "maxLength": 63
                      },
                      "expression": {
                        "type": "string",
                        "maxLength": 10240
                      }
                    }
                  }
                },
                "variables": {
                  "description": "Named expressions, read as variables.NAME by later variables and expressions.",
                  "type": "array",
                  "maxItems": 64,
                  "items": {
                    "type": "object",
                    "required": [
                      "name",
                      "expression"
                    ],
                    "properties": {
                      "name": {
                        "type": "string",
                        "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                        "maxLength": 63
                      },
                      "expression": {
                        "type": "string",
                        "maxLength": 10240
                      }
                    }
                  }
                },
                "expressions": {
                  "description": "Each must evaluate to true for a compliant object.",
                  "type": "array",
                  "minItems": 1,
                  "maxItems": 64,
                  "items": {
                    "type": "object",
                    "required": [
                      "expression"
                    ],
                    "properties": {
                      "expression": {
                        "type": "string",
                        "maxLength": 10240
                      },
                      "message": {
                        "type": "string",
                        "maxLength": 1024
                      },
                      "messageExpression": {
                        "type": "string",
                        "maxLength": 10240
                      },
                      "reason": {
                        "type": "string",
                        "enum": [
                          "Unauthorized",
                          "Forbidden",
                          "Invalid",
                          "RequestEntityTooLarge"
                        ]
                      }
                    }
                  }
                }
              }
            }
          }
        },
        "audit": {
          "type": "object",
          "properties": {
            "actions": {
              "description": "Leader-only side effects on existing violating objects.",
              "type": "array",
              "items": {
                "type": "object",
                "required": [
                  "type"
                ],
                "properties": {
                  "type": {
                    "type": "string",
                    "enum": [
                      "label",
                      "annotate",
                      "evict",
                      "alert"
                    ]
                  },
                  "key": {
                    "type": "string"
                  },
                  "value": {
                    "type": "string"
                  }
                }
              }
            }
          }
        }
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "observedGeneration": {
          "type": "integer",
          "format": "int64"
        },
        "conditions": CONDITIONS,
        "violations": {
          "description": "Objects violating the rule now.",
          "type": "integer",
          "format": "int64"
        },
        "lastAuditTime": {
          "type": "string",
          "format": "date-time"
        }
      }
    }
  }
};
