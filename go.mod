module github.com/superstep/superstep

go 1.26.8
