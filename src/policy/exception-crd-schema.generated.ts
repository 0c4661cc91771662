// GENERATED from charts/portal/crds/portal.dev_portalexceptions.yaml by
// `node --import tsx test/policy/generate-crd-schema.ts`. Do not edit by hand:
// edit the CRD manifest and regenerate.

import { CONDITIONS, LABEL_SELECTOR_PROPERTIES } from './crd-shared.generated.ts';

/** The openAPIV3Schema of PortalException. */
export const EXCEPTION_CRD_OPENAPI_SCHEMA: Readonly<Record<string, unknown>> = {
  "description": "Exempts the objects it matches from the rules it names, with an owner, a reason and an optional expiry (docs/exceptions.md).",
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
        "rules",
        "match",
        "reason"
      ],
      "properties": {
        "rules": {
          "description": "The rules exempted. NAME is a PortalClusterRule, a PortalRule in this exception's namespace, or a ValidatingAdmissionPolicy (every binding); NAMESPACE/NAME is a PortalRule in NAMESPACE, or a ValidatingAdmissionPolicy POLICY/BINDING.",
          "type": "array",
          "minItems": 1,
          "maxItems": 64,
          "items": {
            "type": "string",
            "minLength": 1,
            "maxLength": 507
          }
        },
        "match": {
          "description": "The objects exempted: the same block as a rule's match, plus names. An exception in a namespace that is not one of --exception-namespaces exempts only objects in its own namespace.",
          "type": "object",
          "required": [
            "kinds"
          ],
          "properties": {
            "kinds": {
              "description": "At most 64 entries, each of at most 64 groups, kinds and subresources (an exception is about a few objects).",
              "type": "array",
              "minItems": 1,
              "maxItems": 64,
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
                    "maxItems": 64,
                    "items": {
                      "type": "string",
                      "maxLength": 253
                    }
                  },
                  "kinds": {
                    "description": "Kind names; \"*\" is any kind.",
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 64,
                    "items": {
                      "type": "string",
                      "minLength": 1,
                      "maxLength": 63
                    }
                  },
                  "subresources": {
                    "description": "Subresources also exempted (status, scale, eviction, ...; \"*\" any), as in a rule's match.",
                    "type": "array",
                    "maxItems": 64,
                    "items": {
                      "type": "string",
                      "minLength": 1,
                      "maxLength": 63
                    }
                  }
                }
              }
            },
            "operations": {
              "description": "Admission operations exempted (default every operation; the audit is always exempted).",
              "type": "array",
              "maxItems": 4,
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
            "names": {
              "description": "Only objects with these names; a trailing * is a prefix glob. A CREATE with generateName and no name is matched on its generateName.",
              "type": "array",
              "maxItems": 64,
              "items": {
                "type": "string",
                "minLength": 1,
                "maxLength": 253
              }
            },
            "namespaces": {
              "description": "Only these namespaces; a trailing * is a prefix glob.",
              "type": "array",
              "maxItems": 64,
              "items": {
                "type": "string",
                "minLength": 1,
                "maxLength": 63
              }
            },
            "excludedNamespaces": {
              "description": "Never these namespaces; a trailing * is a prefix glob.",
              "type": "array",
              "maxItems": 64,
              "items": {
                "type": "string",
                "minLength": 1,
                "maxLength": 63
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
          "description": "When the exception names Pod, it also exempts the pod templates of workloads (Deployment, DaemonSet, ...) that a rule matching Pod checks, matched on the workload's name and labels (default true).",
          "type": "boolean"
        },
        "matchConditions": {
          "description": "CEL expressions in ValidatingAdmissionPolicy syntax (object, oldObject, request, namespaceObject); all must be true for the exception to apply.",
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
                "minLength": 1,
                "maxLength": 63
              },
              "expression": {
                "type": "string",
                "minLength": 1,
                "maxLength": 10240
              }
            }
          }
        },
        "expiresAt": {
          "description": "When the exemption ends (RFC 3339). Without it the exception never expires, unless --max-exception-lifetime refuses it.",
          "type": "string",
          "format": "date-time"
        },
        "reason": {
          "description": "Why the exemption is needed (free text, e.g. a ticket). Required.",
          "type": "string",
          "minLength": 1,
          "maxLength": 1024
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
        "exempted": {
          "description": "Objects the exception exempts now (from the audit).",
          "type": "integer",
          "format": "int64"
        }
      }
    }
  }
};
