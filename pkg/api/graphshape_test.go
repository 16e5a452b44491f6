package api_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
)

func TestGraphShape(t *testing.T) {
	e := newEnv(t)
	var g api.Graph
	e.do("GET", "/v1/graphs/echo", nil).ok(t, http.StatusOK, &g)
	want := []pregel.Edge{
		{From: pregel.Start, To: "upper", Kind: pregel.EdgeStatic},
		{From: "upper", To: "exclaim", Kind: pregel.EdgeStatic},
		{From: "exclaim", To: pregel.End, Kind: pregel.EdgeStatic},
	}
	if !reflect.DeepEqual(g.Edges, want) {
		t.Errorf("edges = %+v, want %+v", g.Edges, want)
	}
	if got := g.Policies["upper"]; got.MaxAttempts != 1 {
		t.Errorf("policy of upper = %+v, want max_attempts 1", got)
	}
}
