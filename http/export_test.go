package http

// Handovers is how many connections the server has handed to net/http.
func Handovers() int64 { return handovers.Load() }
