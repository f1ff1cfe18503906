package webhook

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/zap"
)

func TestGetOptions(t *testing.T) {
	ignoreLogger := cmpopts.IgnoreFields(Options{}, "Logger")
	if diff := cmp.Diff(DefaultOptions(), GetOptions(context.Background()), ignoreLogger); diff != "" {
		t.Errorf("GetOptions without WithOptions (-want +got):\n%s", diff)
	}
	ctx := WithOptions(context.Background(), Options{SecretName: "certs", CallInKubeNamespaces: true, Logger: zap.NewNop()})
	want := DefaultOptions()
	want.SecretName, want.CallInKubeNamespaces = "certs", true
	if diff := cmp.Diff(want, GetOptions(ctx), ignoreLogger); diff != "" {
		t.Errorf("GetOptions after WithOptions (-want +got):\n%s", diff)
	}
}
