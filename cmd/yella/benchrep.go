package main

import (
	"context"
	"io"
	"os/signal"
	"syscall"

	"github.com/yella-go/yella/internal/tools/benchcmd"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return benchcmd.Run(ctx, "yella bench", args, stdout, stderr)
}

func reportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return benchcmd.Run(ctx, "yella report", append([]string{"report"}, args...), stdout, stderr)
}
