// Package config holds the YAML that deploys the GithubBinding example
// (examples/githubbinding) to a cluster, numbered in the order kubectl
// applies them:
//
//	100-namespace.yaml               bindkit-system
//	200-serviceaccount.yaml          the controller's identity
//	201-clusterrole.yaml             least privilege, cluster-wide
//	202-clusterrolebinding.yaml
//	203-role.yaml                    leases, certificates and config in bindkit-system
//	204-rolebinding.yaml
//	205-metrics-reader.yaml          who may scrape /metrics (bind it to Prometheus)
//	300-githubbinding.yaml           the CRD, with a validating schema
//	400-webhook-service.yaml         Service "webhook" (webhook.DefaultServiceName)
//	410-metrics-service.yaml         the replicas' metrics endpoints, HTTPS
//	500-webhook-configuration.yaml   filled in by the controller at run time
//	600-secret.yaml                  "webhook-certs" (webhook.DefaultSecretName)
//	700-deployment.yaml              two hardened replicas
//
// Install with `kubectl apply -f config/` after pushing the image the
// repository's Dockerfile builds. The package has no Go API: its tests
// prove the real kube-apiserver accepts every file (server-side apply, dry
// run) and that the RBAC rules stay within an allowlist.
package config
