//go:build !superstep.lambda

package superstep

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
	"github.com/superstep/superstep/pkg/schedule/sqlitesched"
)

// startSchedules opens the schedules kept in the SQLite file at path and
// fires them in this process until stop is called (stop may be called
// more than once); closeStore closes their store, once the API serves no
// more.
func startSchedules(ctx context.Context, path string, svc *runs.Service, log *slog.Logger) (ss *schedule.Service, stop, closeStore func(), err error) {
	st, err := sqlitesched.Open(ctx, path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open schedules: %w", err)
	}
	ss = &schedule.Service{Runs: svc, Backend: st}
	runner := schedule.NewRunner(ss, schedule.RunnerConfig{Logger: log})
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Run(runCtx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	closeStore = func() {
		stop()
		if err := st.Close(); err != nil {
			log.Warn("close schedules", "error", err)
		}
	}
	return ss, stop, closeStore, nil
}
