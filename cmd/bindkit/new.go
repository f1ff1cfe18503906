package main

import (
	"context"
	"io"
)

func runNew(ctx context.Context, args []string, stdout, stderr io.Writer) error { return nil }
