// Package rollout_test is the rollout fault matrix: a rollout whose change
// breaks its subjects, run through the sinkbinding example binary on a
// control plane whose nodes run pods, with its leader killed, or its
// lease renewals refused, at every step of a wave. It runs against the
// newest minor only, as the other fault suites.
package rollout_test
