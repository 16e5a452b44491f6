//go:build !superstep.lambda

package superstep

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/superstep/superstep/pkg/api"
)

// getStorage reads what a run or thread stores (path is its resource);
// nil, without error, from a server that does not serve storage (404
// although the run or thread exists: an older server).
func getStorage(ctx context.Context, cl *client, path string) (*api.Storage, error) {
	var st api.Storage
	if _, err := cl.do(ctx, http.MethodGet, path+"/storage", nil, nil, &st); err != nil {
		if ae := (*apiError)(nil); errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil, nil
		}
		return nil, err
	}
	return &st, nil
}

// fmtStorage is a Storage in one line for people.
func fmtStorage(st *api.Storage) string {
	s := fmt.Sprintf("%s (checkpoints %s, segments %s, events %s, records %s)",
		fmtBytes(st.TotalBytes), fmtBytes(st.CheckpointBytes), fmtBytes(st.SegmentBytes), fmtBytes(st.EventBytes), fmtBytes(st.RecordBytes))
	if st.Runs > 1 {
		s += fmt.Sprintf(" in %d runs", st.Runs)
	}
	return s
}

// fmtBytes is n bytes in B, KB or MB (powers of 1,000).
func fmtBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1000_000)
}
