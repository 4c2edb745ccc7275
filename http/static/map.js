// The GeoEvent map page: the entities in view, refreshed by polling the
// API of the same origin; drawn shapes run radius, bbox and polygon queries;
// clicking an entity draws its history track. Plain JavaScript, no build
// step. The URL may set the state the page starts in:
//   ?view=LAT,LON,ZOOM  ?circle=LAT,LON,RADIUS_M  ?box=SOUTH,WEST,NORTH,EAST
//   ?polygon=LAT,LON;LAT,LON;LAT,LON...  ?entity=ID  ?poll=MS (0: no polling)
(function () {
  'use strict';

  var MAX_MARKERS = 5000;   // markers drawn at most (5 pages of the radius query)
  var MAX_RESULTS = 10000;  // results a drawn shape lists at most
  var MAX_TRACK = 10000;    // points of a track at most
  var TRACK_SPAN_NS = 86400n * 1000000000n; // a track shows the day before the latest event

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

  // --- the entities in view ---

  var entities = L.layerGroup().addTo(map);
  var markers = new Map(); // entity id -> circle marker
  var refreshing = false;

  // refresh shows the entities within the circle around the view.
  function refresh() {
    if (refreshing) return Promise.resolve();
    refreshing = true;
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
        var m = markers.get(ev.entity_id);
        if (m) {
          m.setLatLng([ev.lat, ev.lon]);
        } else {
          m = L.circleMarker([ev.lat, ev.lon], {
            radius: 5, weight: 1, color: '#1a4d80', fillColor: '#3182ce', fillOpacity: 0.9, className: 'ge-entity'
          }).addTo(entities);
          m.on('click', function () { showTrack(m.ev.entity_id); });
          markers.set(ev.entity_id, m);
        }
        m.ev = ev;
        m.bindTooltip(ev.entity_id + '<br>' + formatTime(ev.timestamp_ns));
      });
      markers.forEach(function (m, id) {
        if (!seen.has(id)) {
          entities.removeLayer(m);
          markers.delete(id);
        }
      });
      statusEl.dataset.entities = String(markers.size);
      setStatus(markers.size + ' ' + (markers.size === 1 ? 'entity' : 'entities') + ' in view' +
        (res.more ? ' (the first ' + MAX_MARKERS + ')' : '') + ' · ' + new Date().toLocaleTimeString());
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
    var done = [refresh()];
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
    var poll = params.has('poll') ? Number(params.get('poll')) : 2000;
    if (poll > 0) setInterval(refresh, poll);
    map.on('moveend', refresh);
    Promise.all(done).then(function () { document.body.dataset.ready = 'true'; });
  });
})();
