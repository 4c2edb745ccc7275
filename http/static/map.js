// The GeoEvent map page, on the API of the same origin: the entities in
// view, moved live by the position stream (GET /feed/positions) or, where
// the server has none, refreshed by polling; drawn shapes run radius, bbox
// and polygon queries; clicking an entity draws its history track; the
// fences are drawn, and their enter and exit events (GET /feed) listed and
// flashed as they happen. Plain JavaScript, no build step. The URL may set
// the state the page starts in:
//   ?view=LAT,LON,ZOOM  ?circle=LAT,LON,RADIUS_M  ?box=SOUTH,WEST,NORTH,EAST
//   ?polygon=LAT,LON;LAT,LON;LAT,LON...  ?entity=ID
//   ?poll=MS (polling's period; 0: no polling)  ?live=0 (poll, no stream)
//   ?fences=N (fences drawn at most, 2,000 by default; 0: hidden)
(function () {
  'use strict';

  var MAX_MARKERS = 5000;   // markers drawn at most (5 pages of the radius query)
  var MAX_RESULTS = 10000;  // results a drawn shape lists at most
  var MAX_TRACK = 10000;    // points of a track at most
  var TRACK_SPAN_NS = 86400n * 1000000000n; // a track shows the day before the latest event
  var MAX_FENCES_LOADED = 100000; // fences read from GET /fences at most
  var MAX_FENCES_DRAWN = 2000;    // fences drawn at most (those in view), unless ?fences= says fewer
  var MAX_NOTIFICATIONS = 20;     // fence events listed

  var params = new URLSearchParams(location.search);
  var tiles = document.querySelector('meta[name="geoevent-tiles"]').content;
  var statusEl = document.getElementById('status');

  var map = L.map('map', { doubleClickZoom: false, worldCopyJump: true });
  window.geoeventMap = map; // for the console, and for tests to find a place's pixel
  var view = (params.get('view') || '').split(',').map(Number);
  if (view.length === 3 && view.every(isFinite)) {
    map.setView([view[0], view[1]], view[2]);
  } else {
    map.setView([20, 0], 2);
  }

  if (tiles) {
    var host = tiles.replace(/^https?:\/\//, '').split('/')[0].replace('{s}.', '');
    L.tileLayer(tiles, { maxZoom: 19, attribution: 'Tiles: ' + host }).addTo(map);
  } else {
    graticule();
  }

  // --- the API ---

  // api sends a request to the API and returns its JSON; an error answer
  // throws an Error whose message is the code, its name and the message.
  function api(method, path, body) {
    var opts = { method: method, headers: {} };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    return fetch(path, opts).then(function (r) {
      return r.text().then(function (text) {
        var j;
        try { j = JSON.parse(text); } catch (e) {
          throw new Error('HTTP ' + r.status + ': ' + text.slice(0, 200));
        }
        if (r.ok) return j;
        if (j.error_code !== undefined) throw new Error(j.error_code + ' ' + j.error_name + ': ' + j.message);
        if (j.error) throw new Error(j.error.code + ' ' + j.error.message + ': ' + j.error.details);
        throw new Error('HTTP ' + r.status);
      });
    });
  }

  // pages follows a paged query's cursors: next(cursor) fetches a page;
  // it resolves to {events, more} with at most max events.
  function pages(next, max) {
    var events = [];
    function step(cursor) {
      return next(cursor).then(function (p) {
        events = events.concat(p.events);
        if (p.has_more && p.cursor && events.length < max) return step(p.cursor);
        return { events: events.slice(0, max), more: p.has_more || events.length > max };
      });
    }
    return step(null);
  }

  function post(path, body) {
    return function (cursor) {
      var b = Object.assign({}, body, { limit: 1000 });
      if (cursor) b.cursor = cursor;
      return api('POST', path, b);
    };
  }

  function formatTime(ns) {
    return new Date(Number(BigInt(ns) / 1000000n)).toISOString().replace('.000Z', 'Z');
  }

  function setStatus(text, error) {
    statusEl.textContent = text;
    statusEl.classList.toggle('error', !!error);
  }

  // showStatus says how many entities are in view and how they are kept
  // up to date.
  var entitiesText = '';
  function showStatus() {
    setStatus(entitiesText + ' · ' + liveText() + ' · ' + new Date().toLocaleTimeString());
  }

  // latLngOf is an event's place: Form A's degrees or Form B's nanodegrees
  // (the feeds' streams render Form B).
  function latLngOf(ev) {
    if (ev.lat !== undefined) return L.latLng(ev.lat, ev.lon);
    return L.latLng(Number(ev.lat_nano) / 1e9, Number(ev.lon_nano) / 1e9);
  }

  // flash makes a drawn layer blink once (map.css's .ge-flash).
  function flash(layer) {
    var el = layer && layer.getElement && layer.getElement();
    if (!el) return;
    el.classList.remove('ge-flash');
    void el.getBoundingClientRect(); // a reflow, so that the animation starts again
    el.classList.add('ge-flash');
    clearTimeout(layer.flashTimer);
    layer.flashTimer = setTimeout(function () { el.classList.remove('ge-flash'); }, 1600);
  }

  // --- the entities in view ---

  var entities = L.layerGroup().addTo(map);
  var markers = new Map(); // entity id -> circle marker
  window.geoeventMarkers = markers; // for the console and tests
  var refreshing = false;
  var touches = 0; // counts markers placed by the streams (see refresh)

  // placeMarker shows an entity at an event's place, unless its marker
  // shows a later event (an answer that was on its way while a stream
  // moved the marker is older). It returns the marker.
  function placeMarker(ev, live) {
    var m = markers.get(ev.entity_id);
    if (m && BigInt(m.ev.timestamp_ns) > BigInt(ev.timestamp_ns)) return m;
    if (m) {
      m.setLatLng(latLngOf(ev));
    } else {
      m = L.circleMarker(latLngOf(ev), {
        radius: 5, weight: 1, color: '#1a4d80', fillColor: '#3182ce', fillOpacity: 0.9, className: 'ge-entity'
      }).addTo(entities);
      m.on('click', function () { showTrack(m.ev.entity_id); });
      markers.set(ev.entity_id, m);
    }
    m.ev = ev;
    if (live) m.touched = ++touches;
    var tip = ev.entity_id + '<br>' + formatTime(ev.timestamp_ns);
    if (m.getTooltip()) m.setTooltipContent(tip); else m.bindTooltip(tip);
    return m;
  }

  function removeMarker(id) {
    var m = markers.get(id);
    if (m) {
      entities.removeLayer(m);
      markers.delete(id);
    }
  }

  // refresh shows the entities within the circle around the view.
  function refresh() {
    if (refreshing) return Promise.resolve();
    refreshing = true;
    var since = touches;
    var b = map.getBounds();
    var c = map.wrapLatLng(map.getCenter());
    var r = 1;
    [b.getNorthEast(), b.getNorthWest(), b.getSouthEast(), b.getSouthWest()].forEach(function (p) {
      r = Math.max(r, map.distance(map.getCenter(), p));
    });
    var body = {
      center_lat: Math.max(-90, Math.min(90, c.lat)), center_lon: c.lng,
      radius_m: Math.ceil(Math.min(r, 20015000))
    };
    return pages(post('query/radius?form=a', body), MAX_MARKERS).then(function (res) {
      var seen = new Set();
      res.events.forEach(function (ev) {
        seen.add(ev.entity_id);
        placeMarker(ev, false);
      });
      // A marker the answer lacks is gone from the view, unless a stream
      // placed it after the query went out.
      markers.forEach(function (m, id) {
        if (!seen.has(id) && !(m.touched > since)) removeMarker(id);
      });
      statusEl.dataset.entities = String(markers.size);
      entitiesText = markers.size + ' ' + (markers.size === 1 ? 'entity' : 'entities') + ' in view' +
        (res.more ? ' (the first ' + MAX_MARKERS + ')' : '');
      showStatus();
    }).catch(function (e) {
      setStatus(e.message, true);
    }).finally(function () {
      refreshing = false;
    });
  }

  // --- drawn shapes ---

  var drawn = L.layerGroup().addTo(map);
  var mode = null;       // 'circle', 'box', 'polygon' or null
  var start = null;      // where a circle or box drag began
  var temp = null;       // the shape being drawn
  var vertices = [];     // a polygon's vertices so far
  var finishBtn = document.getElementById('finish');

  document.querySelectorAll('#tools button[data-mode]').forEach(function (btn) {
    btn.addEventListener('click', function () { setMode(mode === btn.dataset.mode ? null : btn.dataset.mode); });
  });
  document.getElementById('clear').addEventListener('click', function () {
    setMode(null);
    drawn.clearLayers();
    track.clearLayers();
    document.getElementById('query').hidden = true;
    document.getElementById('track').hidden = true;
  });
  finishBtn.addEventListener('click', finishPolygon);

  function setMode(m) {
    mode = m;
    start = null;
    vertices = [];
    if (temp) { drawn.removeLayer(temp); temp = null; }
    document.querySelectorAll('#tools button[data-mode]').forEach(function (b) {
      b.classList.toggle('active', b.dataset.mode === m);
    });
    finishBtn.hidden = m !== 'polygon';
    if (m) map.dragging.disable(); else map.dragging.enable();
    map.getContainer().style.cursor = m ? 'crosshair' : '';
  }

  map.on('mousedown', function (e) {
    if (mode !== 'circle' && mode !== 'box') return;
    start = e.latlng;
    temp = (mode === 'circle' ? L.circle(start, { radius: 1 }) : L.rectangle(L.latLngBounds(start, start))).addTo(drawn);
  });
  map.on('mousemove', function (e) {
    if (start && mode === 'circle') temp.setRadius(map.distance(start, e.latlng));
    if (start && mode === 'box') temp.setBounds(L.latLngBounds(start, e.latlng));
    if (mode === 'polygon' && vertices.length) temp.setLatLngs(vertices.concat([e.latlng]));
  });
  map.on('mouseup', function (e) {
    if (!start) return;
    var s = start;
    var m = mode;
    setMode(null);
    if (m === 'circle') {
      runShape({ kind: 'circle', center: s, radius: map.distance(s, e.latlng) });
    } else {
      var b = L.latLngBounds(s, e.latlng);
      runShape({ kind: 'box', bounds: b });
    }
  });
  map.on('click', function (e) {
    if (mode !== 'polygon') return;
    vertices.push(e.latlng);
    if (!temp) temp = L.polyline(vertices, { dashArray: '4' }).addTo(drawn);
    temp.setLatLngs(vertices);
  });
  map.on('dblclick', function () {
    if (mode === 'polygon') finishPolygon();
  });

  function finishPolygon() {
    // A double-click adds its point twice: drop repeats.
    var vs = vertices.filter(function (v, i) { return i === 0 || !v.equals(vertices[i - 1]); });
    setMode(null);
    if (vs.length < 3) {
      setStatus('a polygon needs 3 vertices or more', true);
      return;
    }
    runShape({ kind: 'polygon', vertices: vs });
  }

  // runShape draws a shape, runs its query and lists the results.
  function runShape(shape) {
    drawn.clearLayers();
    var path, body, what;
    if (shape.kind === 'circle') {
      L.circle(shape.center, { radius: shape.radius, className: 'ge-shape' }).addTo(drawn);
      path = 'query/radius?form=a';
      body = { center_lat: shape.center.lat, center_lon: map.wrapLatLng(shape.center).lng, radius_m: Math.max(1, Math.round(shape.radius)) };
      what = 'within ' + Math.round(shape.radius) + ' m';
    } else if (shape.kind === 'box') {
      var b = shape.bounds;
      L.rectangle(b, { className: 'ge-shape' }).addTo(drawn);
      var sw = map.wrapLatLng(b.getSouthWest()), ne = map.wrapLatLng(b.getNorthEast());
      path = 'query/bbox?form=a';
      body = { min_lat: sw.lat, min_lon: sw.lng, max_lat: ne.lat, max_lon: ne.lng };
      what = 'in the box';
    } else {
      var vs = shape.vertices;
      L.polygon(vs, { className: 'ge-shape' }).addTo(drawn);
      path = 'query/polygon?form=a';
      // The map draws edges as straight lines in longitude and latitude:
      // planar edges test what the user sees.
      body = { edges: 'planar', vertices: vs.map(function (v) { v = map.wrapLatLng(v); return { lat: v.lat, lon: v.lng }; }) };
      what = 'in the polygon';
    }
    var section = document.getElementById('query');
    var title = document.getElementById('query-title');
    var list = document.getElementById('results');
    section.hidden = false;
    delete title.dataset.count; // set again when the results are in
    title.textContent = 'Querying…';
    list.textContent = '';
    return pages(post(path, body), MAX_RESULTS).then(function (res) {
      title.textContent = res.events.length + ' ' + (res.events.length === 1 ? 'entity ' : 'entities ') + what +
        (res.more ? ' (the first ' + MAX_RESULTS + ')' : '');
      title.dataset.count = String(res.events.length);
      res.events.forEach(function (ev) {
        var li = document.createElement('li');
        li.className = 'ge-result';
        li.dataset.entity = ev.entity_id;
        var id = document.createElement('span');
        id.className = 'ge-id';
        id.textContent = ev.entity_id;
        li.appendChild(id);
        li.appendChild(document.createTextNode(' ' + ev.lat + ', ' + ev.lon));
        li.title = formatTime(ev.timestamp_ns);
        li.addEventListener('click', function () { showTrack(ev.entity_id); });
        list.appendChild(li);
      });
    }).catch(function (e) {
      title.textContent = e.message;
    });
  }

  // --- tracks ---

  var track = L.layerGroup().addTo(map);

  // showTrack draws an entity's history over the day before its latest event.
  function showTrack(id) {
    var info = document.getElementById('track-info');
    document.getElementById('track').hidden = false;
    delete info.dataset.points; // set again when the track is in
    info.textContent = 'Loading ' + id + '…';
    // Form B here: it takes a decimal id too, and names the entity's UUID.
    return api('GET', 'entity/' + encodeURIComponent(id)).then(function (latest) {
      if (!latest.found) throw new Error('3 ENTITY_NOT_FOUND: no entity ' + id);
      id = latest.event.entity_id;
      var since = BigInt(latest.event.timestamp_ns) - TRACK_SPAN_NS;
      return pages(function (cursor) {
        return api('GET', 'entity/' + encodeURIComponent(id) + '/history?form=a&limit=1000&since_ns=' + since +
          (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
      }, MAX_TRACK);
    }).then(function (res) {
      track.clearLayers();
      var pts = res.events.map(function (ev) { return [ev.lat, ev.lon]; });
      L.polyline(pts, { color: '#d9480f', weight: 3, className: 'ge-track' }).addTo(track);
      res.events.forEach(function (ev) {
        L.circleMarker([ev.lat, ev.lon], { radius: 3, color: '#d9480f', fillOpacity: 1, className: 'ge-track-point' })
          .bindTooltip(formatTime(ev.timestamp_ns)).addTo(track);
      });
      var n = res.events.length;
      info.dataset.points = String(n);
      info.textContent = id + ': ' + n + ' point' + (n === 1 ? '' : 's') +
        (n ? ' from ' + formatTime(res.events[0].timestamp_ns) + ' to ' + formatTime(res.events[n - 1].timestamp_ns) : '') +
        (res.more ? ' (the first ' + MAX_TRACK + ')' : '');
    }).catch(function (e) {
      info.textContent = e.message;
    });
  }

  // --- live positions: the position stream, or polling ---

  // GET /feed/positions?bbox=S,W,N,E streams the moves in a box as
  // Server-Sent Events: "position" (data: the event as GET /entity/{id}
  // renders it) and "delete" (data: {"entity_id"}), "id:" a log index by
  // which the browser resumes. A server without it answers 404, which
  // fails the EventSource before it opens: the page then polls instead,
  // for the rest of its life.
  var pollMS = params.has('poll') ? Number(params.get('poll')) : 2000;
  var liveMode = params.get('live') === '0' ? 'polling' : 'starting'; // then 'stream' or 'polling'
  var positions = null; // the EventSource of the view's box
  var pollTimer = null;
  statusEl.dataset.live = liveMode;

  function liveText() {
    if (liveMode === 'stream') return 'live';
    if (liveMode === 'polling') return pollMS > 0 ? 'polled every ' + pollMS / 1000 + ' s' : 'not refreshed';
    return 'connecting';
  }

  function setLive(m) {
    liveMode = m;
    statusEl.dataset.live = m;
    if (entitiesText) showStatus();
    if (m === 'polling' && pollMS > 0 && !pollTimer) pollTimer = setInterval(refresh, pollMS);
  }

  // viewBox is the view as the stream's bbox: S,W,N,E in degrees, the
  // longitudes wrapped (a west above the east crosses the antimeridian).
  function viewBox() {
    var b = map.getBounds();
    var south = Math.max(-90, b.getSouth()), north = Math.min(90, b.getNorth());
    var west = -180, east = 180;
    if (b.getEast() - b.getWest() < 360) {
      west = map.wrapLatLng([0, b.getWest()]).lng;
      east = map.wrapLatLng([0, b.getEast()]).lng;
    }
    return [south, west, north, east].map(function (v) { return v.toFixed(6); }).join(',');
  }

  // followPositions opens the stream of the view's box (again after each
  // move of the map), and resolves once it is open, the page polls, or 2 s
  // have passed (a stream may send its headers only with its first event).
  function followPositions() {
    if (positions) positions.close();
    positions = null;
    if (liveMode === 'polling') return Promise.resolve();
    return new Promise(function (resolve) {
      setTimeout(resolve, 2000);
      var es = new EventSource('feed/positions?bbox=' + viewBox());
      var opened = false;
      positions = es;
      es.onopen = function () {
        opened = true;
        if (liveMode !== 'stream') setLive('stream');
        resolve();
      };
      es.addEventListener('position', function (e) {
        placeMarker(JSON.parse(e.data), true);
      });
      es.addEventListener('delete', function (e) {
        removeMarker(JSON.parse(e.data).entity_id);
      });
      es.onerror = function (e) {
        if (es !== positions) return; // an old box's stream
        if (e.data) setStatus('position stream: ' + e.data, true); // the server's "error" event
        // Open once, the browser reconnects by itself (readyState
        // CONNECTING); failed at once or closed for good, poll.
        if (!opened || es.readyState === EventSource.CLOSED) {
          es.close();
          positions = null;
          setLive('polling');
          resolve();
        }
      };
    });
  }

  // --- fences ---

  // GET /fences has no spatial filter: the page reads up to
  // MAX_FENCES_LOADED definitions (a page of 1,000 at a time) and draws
  // those whose bounds meet the view, maxDrawn at most. It reads
  // them again when shown again and when the feed names a fence it lacks.
  var fencePane = map.createPane('fences');
  fencePane.style.zIndex = 350; // under the entities and drawn shapes (400), so that they stay clickable
  var fenceLayer = L.layerGroup().addTo(map);
  var fences = new Map();      // name -> {def, bounds}, in name order
  var fenceShapes = new Map(); // name -> its drawn layer
  var fencesTotal = 0;
  var fencesRead = false; // whether a read of the fences has finished
  var fenceToggle = document.getElementById('fences-toggle');
  var fenceInfo = document.getElementById('fence-info');
  var fenceLoad = null; // the load under way
  var maxDrawn = params.has('fences') ? Math.floor(Number(params.get('fences'))) : MAX_FENCES_DRAWN;

  var FENCE_STYLES = {
    polygon: { color: '#6b46c1', fillColor: '#9f7aea', fillOpacity: 0.12, weight: 2 },
    circle: { color: '#2f855a', fillColor: '#48bb78', fillOpacity: 0.12, weight: 2 },
    bbox: { color: '#c05621', fillColor: '#ed8936', fillOpacity: 0.10, weight: 2, dashArray: '6 4' }
  };

  function loadFences() {
    if (fenceLoad) return fenceLoad;
    fenceInfo.textContent = 'Loading fences…';
    var loaded = new Map();
    function step(after) {
      return api('GET', 'fences?form=a&limit=1000' + (after ? '&after=' + encodeURIComponent(after) : '')).then(function (p) {
        fencesTotal = p.total;
        p.fences.forEach(function (f) {
          if (loaded.size < MAX_FENCES_LOADED) loaded.set(f.name, { def: f, bounds: fenceBounds(f) });
        });
        if (p.has_more && p.fences.length && loaded.size < MAX_FENCES_LOADED) return step(p.fences[p.fences.length - 1].name);
      });
    }
    fenceLoad = step(null).then(function () {
      fences = loaded;
      fencesRead = true;
      fenceShapes.forEach(function (layer) { fenceLayer.removeLayer(layer); });
      fenceShapes.clear();
      drawFences();
    }).catch(function (e) {
      fenceInfo.textContent = 'Fences: ' + e.message;
    }).finally(function () {
      fenceLoad = null;
    });
    return fenceLoad;
  }

  // fenceBounds is a fence's bounding box (a bbox across the antimeridian
  // runs east past 180).
  function fenceBounds(f) {
    if (f.shape === 'polygon') return L.latLngBounds(f.vertices.map(latLngOf));
    if (f.shape === 'circle') return latLngOf(f.center).toBounds(2 * f.radius_m);
    var east = f.max.lon < f.min.lon ? f.max.lon + 360 : f.max.lon;
    return L.latLngBounds([f.min.lat, f.min.lon], [f.max.lat, east]);
  }

  function fenceShape(fence) {
    var f = fence.def;
    var opts = Object.assign({ pane: 'fences', className: 'ge-fence ge-fence-' + f.shape }, FENCE_STYLES[f.shape]);
    var layer;
    if (f.shape === 'polygon') {
      layer = L.polygon([f.vertices.map(latLngOf)].concat((f.holes || []).map(function (h) { return h.map(latLngOf); })), opts);
    } else if (f.shape === 'circle') {
      layer = L.circle(latLngOf(f.center), Object.assign({ radius: f.radius_m }, opts));
    } else {
      layer = L.rectangle(fence.bounds, opts);
    }
    var tip = document.createElement('span'); // text, not HTML: a name is the client's
    tip.textContent = f.name + ' (' + f.shape + (f.group_id !== undefined ? ', group ' + f.group_id : '') +
      '; reports ' + f.report.join(', ') + ')';
    layer.bindTooltip(tip, { sticky: true });
    return layer;
  }

  // drawFences draws the fences in view, maxDrawn at most, and
  // removes the others.
  function drawFences() {
    if (!fenceToggle.checked || !fencesRead) return;
    var view = map.getBounds();
    var want = new Set();
    var inView = 0;
    fences.forEach(function (fence, name) {
      if (!view.intersects(fence.bounds)) return;
      inView++;
      if (want.size < maxDrawn) want.add(name);
    });
    fenceShapes.forEach(function (layer, name) {
      if (!want.has(name)) {
        fenceLayer.removeLayer(layer);
        fenceShapes.delete(name);
      }
    });
    want.forEach(function (name) {
      if (fenceShapes.has(name)) return;
      var layer = fenceShape(fences.get(name)).addTo(fenceLayer);
      layer.getElement().dataset.fence = name;
      fenceShapes.set(name, layer);
    });
    fenceInfo.dataset.total = String(fencesTotal);
    fenceInfo.dataset.read = String(fences.size);
    fenceInfo.dataset.drawn = String(fenceShapes.size);
    fenceInfo.textContent = fencesTotal + ' fence' + (fencesTotal === 1 ? '' : 's') +
      (fences.size < fencesTotal ? ' (the first ' + fences.size + ' read)' : '') + '; ' +
      (inView > fenceShapes.size ? 'the first ' + fenceShapes.size + ' of ' + inView + ' in view drawn' : inView + ' in view');
  }

  fenceToggle.checked = maxDrawn !== 0;
  if (!(maxDrawn > 0 && maxDrawn < MAX_FENCES_DRAWN)) maxDrawn = MAX_FENCES_DRAWN; // 0 (hidden), NaN or more: the default
  fenceToggle.addEventListener('change', function () {
    if (fenceToggle.checked) {
      map.addLayer(fenceLayer);
      loadFences();
    } else {
      map.removeLayer(fenceLayer);
      fenceInfo.textContent = 'Fences hidden';
      fenceInfo.dataset.drawn = '0';
    }
  });
  if (!fenceToggle.checked) map.removeLayer(fenceLayer);
  map.on('moveend', drawFences);

  // --- fence events: GET /feed ---

  // The page shows what happens from when it opens: it asks where the
  // feed ends (feedEnd), streams from there, and on a lost connection opens
  // the stream again after the last sequence it saw (after= in the URL; the
  // server would also take the Last-Event-ID header that an EventSource
  // sends when it reconnects by itself, but the page closes and reopens it).
  var feedLast = null; // BigInt: the last sequence seen (or the end it started at)
  var feedFailures = 0;
  var feedList = document.getElementById('events');
  var unknownReload = 0; // when a notification last made the page read the fences again

  // feedEnd returns the sequence after which the feed holds nothing yet:
  // a page read from the end (after=now) answers it as next.
  function feedEnd() {
    return api('GET', 'feed?form=a&wait_ms=0&limit=1&after=now').then(function (p) {
      return BigInt(p.next);
    });
  }

  // followFeed resolves once the stream is open (or has failed).
  function followFeed() {
    var start = feedLast === null ? feedEnd().then(function (end) { feedLast = end; }) : Promise.resolve();
    return start.then(function () {
      return new Promise(function (resolve) {
        var es = new EventSource('feed?after=' + feedLast);
        es.onopen = function () {
          feedFailures = 0;
          resolve();
        };
        ['enter', 'exit', 'inside'].forEach(function (t) { es.addEventListener(t, onNotification); });
        es.onerror = function () {
          // Lost, refused or an "error" event: open it again after the
          // last sequence seen, waiting longer each time; after three
          // failures in a row (a trimmed sequence, say) from the end.
          es.close();
          feedFailures++;
          if (feedFailures >= 3) feedLast = null;
          setTimeout(followFeed, Math.min(30000, 500 * Math.pow(2, feedFailures)));
          resolve();
        };
      });
    }).catch(function (e) {
      feedFailures++;
      setTimeout(followFeed, Math.min(30000, 500 * Math.pow(2, feedFailures)));
      setStatus('feed: ' + e.message, true);
    });
  }

  // onNotification lists a fence event and flashes its fence and entity.
  function onNotification(e) {
    var n = JSON.parse(e.data);
    var seq = BigInt(n.seq);
    if (feedLast !== null && seq <= feedLast) return; // seen before the stream was opened again
    feedLast = seq;
    var li = document.createElement('li');
    li.className = 'ge-notification ge-' + n.type;
    li.dataset.type = n.type;
    li.dataset.fence = n.fence;
    li.dataset.entity = n.entity_id;
    var type = document.createElement('b');
    type.textContent = n.type;
    var id = document.createElement('span');
    id.className = 'ge-id';
    id.textContent = n.entity_id.slice(0, 8);
    li.append(type, ' ' + n.fence + ' · ', id, ' · ' + formatTime(n.event.timestamp_ns).replace(/^.*T/, ''));
    li.title = n.entity_id + ' ' + n.type + ' ' + n.fence + ' at ' + formatTime(n.event.timestamp_ns);
    li.addEventListener('click', function () { showTrack(n.entity_id); });
    feedList.prepend(li);
    while (feedList.children.length > MAX_NOTIFICATIONS) feedList.lastChild.remove();
    document.getElementById('feed').hidden = false;

    // The event is the entity's latest position: show it there.
    var m = markers.get(n.entity_id);
    if (m || map.getBounds().contains(latLngOf(n.event))) m = placeMarker(n.event, true);
    flash(m);
    if (fenceShapes.has(n.fence)) flash(fenceShapes.get(n.fence));
    else if (fenceToggle.checked && !fences.has(n.fence) && Date.now() - unknownReload > 10000) {
      unknownReload = Date.now(); // a fence defined since the page read them; at most every 10 s
      loadFences();
    }
  }

  // --- the graticule of a map without tiles ---

  function graticule() {
    var layer = L.layerGroup().addTo(map);
    var steps = [30, 10, 5, 2, 1, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001];
    function draw() {
      layer.clearLayers();
      var b = map.getBounds().pad(0.5);
      var span = Math.max(b.getNorth() - b.getSouth(), (b.getEast() - b.getWest()) / 2);
      var step = steps[steps.length - 1];
      for (var i = 0; i < steps.length; i++) {
        if (span / steps[i] >= 4) { step = steps[i]; break; }
      }
      var style = { color: '#b8c4ce', weight: 1, interactive: false, className: 'ge-graticule' };
      var south = Math.max(-90, b.getSouth()), north = Math.min(90, b.getNorth());
      var west = b.getWest(), east = b.getEast();
      for (var lat = Math.ceil(south / step) * step; lat <= north; lat += step) {
        L.polyline([[lat, west], [lat, east]], style).addTo(layer);
      }
      for (var lon = Math.ceil(west / step) * step; lon <= east; lon += step) {
        L.polyline([[south, lon], [north, lon]], style).addTo(layer);
      }
    }
    map.on('moveend', draw);
    draw();
  }

  // --- start ---

  function numbers(s, n) {
    var v = (s || '').split(',').map(Number);
    return v.length === n && v.every(isFinite) ? v : null;
  }

  var first = view.length === 3 && view.every(isFinite) ? Promise.resolve() :
    // No view given: fit the map to the latest entities.
    api('POST', 'query/latest?form=a', { limit: 1000 }).then(function (p) {
      if (p.events.length) {
        map.fitBounds(L.latLngBounds(p.events.map(function (ev) { return [ev.lat, ev.lon]; })).pad(0.2), { maxZoom: 15 });
      }
    }).catch(function (e) { setStatus(e.message, true); });

  first.then(function () {
    var done = [refresh(), followPositions(), followFeed()];
    if (fenceToggle.checked) done.push(loadFences());
    var c = numbers(params.get('circle'), 3);
    var b = numbers(params.get('box'), 4);
    if (c) done.push(runShape({ kind: 'circle', center: L.latLng(c[0], c[1]), radius: c[2] }));
    if (b) done.push(runShape({ kind: 'box', bounds: L.latLngBounds([b[0], b[1]], [b[2], b[3]]) }));
    if (params.get('polygon')) {
      var vs = params.get('polygon').split(';').map(function (p) { return numbers(p, 2); });
      if (vs.every(Boolean)) done.push(runShape({ kind: 'polygon', vertices: vs.map(function (v) { return L.latLng(v[0], v[1]); }) }));
      else setStatus('?polygon= wants LAT,LON;LAT,LON;LAT,LON', true);
    }
    if (params.get('entity')) done.push(showTrack(params.get('entity')));
    if (liveMode === 'polling') setLive('polling');
    map.on('moveend', function () {
      refresh();
      followPositions();
    });
    Promise.all(done).then(function () { document.body.dataset.ready = 'true'; });
  });
})();
