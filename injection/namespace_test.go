package injection

import (
	"context"
	"testing"
)

func TestSystemNamespace(t *testing.T) {
	tests := []struct {
		name, ctxNS, env, want, wantPanic string
	}{
		{name: "context wins", ctxNS: "from-ctx", env: "from-env", want: "from-ctx"},
		{name: "environment", env: "from-env", want: "from-env"},
		{name: "neither", wantPanic: "injection: no system namespace; set SYSTEM_NAMESPACE or build the context with injection.WithSystemNamespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(SystemNamespaceEnv, tc.env)
			ctx := context.Background()
			if tc.ctxNS != "" {
				ctx = WithSystemNamespace(ctx, tc.ctxNS)
			}
			defer func() {
				if got, _ := recover().(string); got != tc.wantPanic {
					t.Errorf("panic = %q, want %q", got, tc.wantPanic)
				}
			}()
			if got := SystemNamespace(ctx); got != tc.want {
				t.Errorf("SystemNamespace = %q, want %q", got, tc.want)
			}
		})
	}
}
