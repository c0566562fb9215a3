package sim

import "net/http"

// registerWechat adds the WeChat Pay v3 routes.
func (s *Simulator) registerWechat(mux *http.ServeMux) {}
