package main

import (
	"context"
	"io"
)

func runControlPlane(ctx context.Context, args []string, stdout, stderr io.Writer) error { return nil }
