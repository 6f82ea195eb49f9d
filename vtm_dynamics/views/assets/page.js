// vtm_dynamics view page: builds the scene in Drake's Meshcat viewer from the inlined JSON and plays it.
// Everything comes from this file; the Content-Security-Policy refuses any request to anywhere else.
(function () {
  "use strict";
  var root = document.documentElement;
  var status = { ready: false, meshes: 0, mesh_parses: 0, mesh_errors: 0, errors: [], console_errors: [], violations: 0,
                 t: 0, layers: [], geometry: {} };

  function publish() {  // also called by watch.js when the console reports an error later
    status.violations = (window.vtmViolations || []).length;
    status.console_errors = (window.vtmConsoleErrors || []).slice();
    root.setAttribute("data-vtm-status", JSON.stringify(status));
  }
  window.vtmPublish = publish;

  function fail(message) {
    status.errors.push(String(message).slice(0, 300));
    var box = document.getElementById("vtm-error");
    box.hidden = false;
    box.textContent = status.errors.join("; ");
    publish();
  }

  function bytes(b64) {
    var s = atob(b64), out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  function f32(b64) { return new Float32Array(bytes(b64).buffer); }
  function f64(b64) { return new Float64Array(bytes(b64).buffer); }
  function colorInt(hex) { return parseInt(hex.slice(1), 16); }

  var uid = 0;
  function uuid(prefix) { uid += 1; return prefix + "-" + uid; }

  // 4 x 4 column-major helpers (three.js matrix layout)
  function mul(a, b) {
    var o = new Array(16);
    for (var c = 0; c < 4; c++) for (var r = 0; r < 4; r++) {
      var s = 0;
      for (var k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k];
      o[c * 4 + r] = s;
    }
    return o;
  }
  var Y_TO_Z = [1, 0, 0, 0, 0, 0, 1, 0, 0, -1, 0, 0, 0, 0, 0, 1]; // rotation +90 deg about x: three's y axis -> z
  function scaled(m, s) { return mul(m, [s[0], 0, 0, 0, 0, s[1], 0, 0, 0, 0, s[2], 0, 0, 0, 0, 1]); }
  function poseMatrix(p, i) { // p: position + quaternion (x y z w) at offset i
    var x = p[i + 3], y = p[i + 4], z = p[i + 5], w = p[i + 6];
    var n = Math.sqrt(x * x + y * y + z * z + w * w) || 1;
    x /= n; y /= n; z /= n; w /= n;
    return [1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 2 * (x * z - y * w), 0,
            2 * (x * y - z * w), 1 - 2 * (x * x + z * z), 2 * (y * z + x * w), 0,
            2 * (x * z + y * w), 2 * (y * z - x * w), 1 - 2 * (x * x + y * y), 0,
            p[i], p[i + 1], p[i + 2], 1];
  }

  var scene;
  try {
    scene = JSON.parse(document.getElementById("vtm-scene").textContent);
  } catch (e) { fail("scene data unreadable: " + e); return; }
  // ------------------------------------------------------------------------------------------------ unpacking
  // The viewer script and the robot's mesh files are packed (zlib's format, in base64): the browser's own
  // DecompressionStream unpacks them, each to at most the size the scene gives it.
  var MAX_UNPACKED = 256 * 1024 * 1024;  // bytes of one unpacked block (a mesh file is at most 32 MB by default)
  function blockBytes(id) {
    var text = document.getElementById(id).textContent;
    return typeof Uint8Array.fromBase64 === "function" ? Uint8Array.fromBase64(text) : bytes(text);
  }
  function inflate(id, size) {
    if (!(size >= 0 && size <= MAX_UNPACKED)) return Promise.reject(new Error(id + ": declared size out of range"));
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error("this browser cannot unpack the page (no DecompressionStream): use a current one"));
    }
    var reader = new Blob([blockBytes(id)]).stream().pipeThrough(new DecompressionStream("deflate")).getReader();
    var out = new Uint8Array(size), n = 0;
    function next() {
      return reader.read().then(function (r) {
        if (r.done) {
          if (n !== size) throw new Error(id + ": unpacked to " + n + " bytes, expected " + size);
          return out;
        }
        if (n + r.value.length > size) { reader.cancel(); throw new Error(id + ": unpacks to more than " + size + " bytes"); }
        out.set(r.value, n);
        n += r.value.length;
        return next();
      });
    }
    return next();
  }
  function meshContent(m) {
    if (m.encoding === "text") return Promise.resolve(document.getElementById(m.element).textContent);
    if (m.encoding === "base64") return Promise.resolve(bytes(document.getElementById(m.element).textContent));
    return inflate(m.element, m.size).then(function (b) { return m.format === "stl" || m.format === "vtm" ? b : new TextDecoder().decode(b); });
  }

  // ------------------------------------------------------------------------------------------------ baked meshes
  // A mesh baked by views/baked_meshes.py (format vtm-mesh/1, described there): vertices on a grid, coded as
  // differences; triangle corners coded against the next new vertex. Built here into triangles with normals from
  // the faces: a corner's normal sums the faces at its vertex that turn by less than the crease angle from its own.
  var BAKED_MAX = 2000000, CREASE_COS = Math.cos(40 * Math.PI / 180);  // baked_meshes.MAX_*, CREASE_DEG
  function unbake(b) {
    var dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    if (b.length < 64 || String.fromCharCode(b[0], b[1], b[2], b[3]) !== "VTMM" || dv.getUint32(4, true) !== 1) {
      throw new Error("not a vtm-mesh/1 block");
    }
    var nv = dv.getUint32(8, true), nt = dv.getUint32(12, true), wide = nv >= 65536;
    var start = 64 + 6 * nv + 2 * (nv % 2);
    if (!(nv > 0 && nt > 0 && nv <= BAKED_MAX && nt <= BAKED_MAX) || b.length !== start + 3 * nt * (wide ? 4 : 2)) {
      throw new Error("a baked mesh whose counts do not match its length");
    }
    var v = new Float32Array(3 * nv), i, k;
    for (var a = 0; a < 3; a++) {
      var lo = dv.getFloat64(16 + 8 * a, true), step = dv.getFloat64(40 + 8 * a, true), q = 0;
      if (!(isFinite(lo) && step > 0 && isFinite(lo + 65535 * step))) throw new Error("a baked mesh whose grid is not finite");
      var z = new Uint16Array(b.buffer, b.byteOffset + 64 + 2 * a * nv, nv);
      for (i = 0; i < nv; i++) { q = (q + ((z[i] >>> 1) ^ -(z[i] & 1))) & 0xFFFF; v[3 * i + a] = lo + step * q; }
    }
    var codes = wide ? new Uint32Array(b.buffer, b.byteOffset + start, 3 * nt) : new Uint16Array(b.buffer, b.byteOffset + start, 3 * nt);
    var idx = new Uint32Array(3 * nt), fresh = 0;
    for (k = 0; k < 3 * nt; k++) {
      if (codes[k] > fresh) throw new Error("a baked mesh names a vertex before its new ones");
      idx[k] = fresh - codes[k];
      if (codes[k] === 0) fresh += 1;
    }
    if (fresh !== nv) throw new Error("a baked mesh with vertices its triangles do not use");
    var face = new Float64Array(3 * nt), unit = new Float64Array(3 * nt);  // area-weighted and unit face normals
    for (var t = 0; t < nt; t++) {
      var p = 3 * idx[3 * t], r = 3 * idx[3 * t + 1], s = 3 * idx[3 * t + 2];
      var ux = v[r] - v[p], uy = v[r + 1] - v[p + 1], uz = v[r + 2] - v[p + 2];
      var wx = v[s] - v[p], wy = v[s + 1] - v[p + 1], wz = v[s + 2] - v[p + 2];
      var nx = uy * wz - uz * wy, ny = uz * wx - ux * wz, nz = ux * wy - uy * wx, n = Math.sqrt(nx * nx + ny * ny + nz * nz);
      face[3 * t] = nx; face[3 * t + 1] = ny; face[3 * t + 2] = nz;
      if (n > 0) { unit[3 * t] = nx / n; unit[3 * t + 1] = ny / n; unit[3 * t + 2] = nz / n; }
    }
    var first = new Uint32Array(nv + 1), faces = new Uint32Array(3 * nt);  // the faces at each vertex
    for (k = 0; k < 3 * nt; k++) first[idx[k] + 1] += 1;
    for (i = 0; i < nv; i++) first[i + 1] += first[i];
    var fill = first.slice(0, nv);
    for (k = 0; k < 3 * nt; k++) faces[fill[idx[k]]++] = (k / 3) | 0;
    var position = new Float32Array(9 * nt), normal = new Float32Array(9 * nt);
    for (k = 0; k < 3 * nt; k++) {
      var f = (k / 3) | 0, vi = idx[k], sx = 0, sy = 0, sz = 0;
      for (var j = first[vi]; j < first[vi + 1]; j++) {
        var g = faces[j];
        if (unit[3 * f] * unit[3 * g] + unit[3 * f + 1] * unit[3 * g + 1] + unit[3 * f + 2] * unit[3 * g + 2] >= CREASE_COS) {
          sx += face[3 * g]; sy += face[3 * g + 1]; sz += face[3 * g + 2];
        }
      }
      var len = Math.sqrt(sx * sx + sy * sy + sz * sz) || 1;
      position[3 * k] = v[3 * vi]; position[3 * k + 1] = v[3 * vi + 1]; position[3 * k + 2] = v[3 * vi + 2];
      normal[3 * k] = sx / len; normal[3 * k + 1] = sy / len; normal[3 * k + 2] = sz / len;
    }
    return { attributes: { position: { itemSize: 3, type: "Float32Array", array: position, normalized: false },
                           normal: { itemSize: 3, type: "Float32Array", array: normal, normalized: false } } };
  }
  // what a built mesh holds, for tests: its box [file units], its triangles and their area
  function geometryStats(position, index) {
    var n = index ? index.length : position.length / 3, lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity], area = 0;
    for (var k = 0; k < n; k++) {
      var o = 3 * (index ? index[k] : k);
      for (var a = 0; a < 3; a++) { lo[a] = Math.min(lo[a], position[o + a]); hi[a] = Math.max(hi[a], position[o + a]); }
    }
    for (k = 0; k + 2 < n; k += 3) {
      var p = 3 * (index ? index[k] : k), q = 3 * (index ? index[k + 1] : k + 1), r = 3 * (index ? index[k + 2] : k + 2);
      var ux = position[q] - position[p], uy = position[q + 1] - position[p + 1], uz = position[q + 2] - position[p + 2];
      var wx = position[r] - position[p], wy = position[r + 1] - position[p + 1], wz = position[r + 2] - position[p + 2];
      var cx = uy * wz - uz * wy, cy = uz * wx - ux * wz, cz = ux * wy - uy * wx;
      area += 0.5 * Math.sqrt(cx * cx + cy * cy + cz * cz);
    }
    return { box: lo.concat(hi), triangles: Math.floor(n / 3), area: area };
  }
  Promise.all([inflate(scene.viewer.element, scene.viewer.size)].concat(scene.meshes.map(meshContent)))
    .then(function (unpacked) {
      var code = document.createElement("script");  // an inline script: the page's policy allows it, nothing else
      code.textContent = new TextDecoder().decode(unpacked[0]);
      document.head.appendChild(code);
      build(unpacked.slice(1));
    })
    .catch(function (e) { fail("the page could not be unpacked: " + (e && e.message ? e.message : e)); });

  function build(meshData) {
    if (typeof MeshCat === "undefined") { fail("the Meshcat viewer did not load"); return; }
    var viewer = new MeshCat.Viewer(document.getElementById("vtm-pane"));
    function cmd(c) { viewer.handle_command(c); }
    var ON_TOP = { transparent: true, depthTest: false };  // markers drawn over the robot (a path inside a wrist)
    function material(color, opacity, extra) {
      var c = colorInt(color);  // a little self-lit: Meshcat's lights leave saturated colours dark
      var glow = (((c >> 16) & 255) * 0.3) << 16 | (((c >> 8) & 255) * 0.3) << 8 | ((c & 255) * 0.3);
      var m = { uuid: uuid("mat"), type: "MeshPhongMaterial", color: c, emissive: glow, shininess: 30,
                transparent: opacity < 1, opacity: opacity, depthWrite: opacity >= 1, side: 2 };
      if (opacity >= 1) m.transparent = true;  // in the same (sorted) pass as the ghosts, drawn after them
      for (var k in extra || {}) m[k] = extra[k];
      return m;
    }
    // drawing order: ghosts first (no depth written), then the robots over them (a ghost never tints the robot
    // where the two nearly coincide), then the markers that must stay visible inside a mesh
    function setMesh(path, geometry, mat, matrix, order) {
      cmd({ type: "set_object", path: path, object: { metadata: { version: 4.5, type: "Object" },
            geometries: [geometry], materials: [mat],
            object: { uuid: uuid("obj"), type: "Mesh", geometry: geometry.uuid, material: mat.uuid, matrix: matrix,
                      renderOrder: order || 0 } } });
    }

    // ------------------------------------------------------------------------------------------------ robot layers
    // a mesh file is parsed by the viewer's own loader once; every later use (the ghosts, the other copies) gets
    // the geometry it built, as arrays (parsing the UR5's COLLADA files again for each of four copies took most of
    // the time the page needed to open)
    var built = {};  // mesh index -> the geometry the viewer built from the file, as BufferGeometry JSON
    function builtGeometry(g) {
      var attributes = {}, plain = true;
      Object.keys(g.attributes).forEach(function (name) {
        var a = g.attributes[name];
        if (a.isInterleavedBufferAttribute || !ArrayBuffer.isView(a.array)) { plain = false; return; }
        attributes[name] = { itemSize: a.itemSize, type: a.array.constructor.name, array: a.array, normalized: !!a.normalized };
      });
      if (!plain || !attributes.position) return null;
      var data = { attributes: attributes };
      if (g.index) data.index = { type: g.index.array.constructor.name, array: g.index.array };
      if (g.groups && g.groups.length) data.groups = g.groups.map(function (gr) { return { start: gr.start, count: gr.count, materialIndex: gr.materialIndex }; });
      return data;
    }
    function keepBuilt(v, path) {
      if (v.kind !== "mesh" || built[v.mesh]) return;
      var node = viewer.scene_tree.find(path.split("/").filter(function (p) { return p.length > 0; }).concat(["<object>"]));
      var g = node && node.object && node.object.geometry;
      var data = g && g.isBufferGeometry ? builtGeometry(g) : null;
      if (data) {
        built[v.mesh] = data;
        status.geometry[v.mesh] = geometryStats(data.attributes.position.array, data.index ? data.index.array : null);
      }
    }
    function bakedGeometry(index) {  // a baked mesh built once; later uses get the same arrays
      if (!built[index]) {
        status.mesh_parses += 1;
        built[index] = unbake(meshData[index]);
        status.geometry[index] = geometryStats(built[index].attributes.position.array, null);
      }
      return { uuid: uuid("geo"), type: "BufferGeometry", data: built[index] };
    }
    function visualGeometry(v) {
      if (v.kind === "mesh" && built[v.mesh]) return { uuid: uuid("geo"), type: "BufferGeometry", data: built[v.mesh] };
      if (v.kind === "mesh" && scene.meshes[v.mesh].format === "vtm") return bakedGeometry(v.mesh);
      if (v.kind === "mesh") {
        status.mesh_parses += 1;
        return { uuid: uuid("geo"), type: "_meshfile_geometry", format: scene.meshes[v.mesh].format, data: meshData[v.mesh] };
      }
      if (v.kind === "box") return { uuid: uuid("geo"), type: "BoxGeometry", width: v.size[0], height: v.size[1], depth: v.size[2] };
      if (v.kind === "cylinder") return { uuid: uuid("geo"), type: "CylinderGeometry", radiusTop: v.radius,
                                          radiusBottom: v.radius, height: v.length, radialSegments: 24 };
      return { uuid: uuid("geo"), type: "SphereGeometry", radius: v.radius, widthSegments: 24, heightSegments: 16 };
    }
    function visualMatrix(v) {
      if (v.kind === "mesh") return scaled(v.origin, v.scale);
      if (v.kind === "cylinder") return mul(v.origin, Y_TO_Z);
      return v.origin;
    }
    var paths = {};  // toggle name -> scene paths
    var layers = scene.robots.map(function (r, index) {
      // an opaque copy after the first yields where the two coincide (a stop that starts from the planned motion):
      // its depth is pushed back a little, so the first one is drawn there without flicker
      var yielding = r.opacity >= 1 && index > 0 ? { polygonOffset: true, polygonOffsetFactor: 1, polygonOffsetUnits: 4 * index } : null;
      var layer = { name: r.name, frames: r.frames, times: f64(r.times), poses: f32(r.poses), n: scene.links.length,
                    appears: !!r.appears, wanted: true, shown: true };
      paths[r.name] = ["/vtm/robots/" + r.name];
      scene.links.forEach(function (link, i) {
        link.visuals.forEach(function (v, k) {
          try {
            var path = "/vtm/robots/" + r.name + "/" + i + "/" + k;
            setMesh(path, visualGeometry(v), material(r.color, r.opacity, yielding), visualMatrix(v), r.opacity < 1 ? 1 : 2);
            keepBuilt(v, path);
            if (v.kind === "mesh" && r === scene.robots[0]) status.meshes += 1;
          } catch (e) {
            status.mesh_errors += 1;
            fail("link " + link.name + ": " + e);
          }
        });
      });
      status.layers.push(r.name);
      return layer;
    });

    // ------------------------------------------------------------------------------------------------ shapes, lines, clouds
    scene.shapes.forEach(function (s) {
      var path = "/vtm/shapes/" + s.name, geo, matrix;
      if (s.kind === "box") { geo = { uuid: uuid("geo"), type: "BoxGeometry", width: s.size[0], height: s.size[1], depth: s.size[2] }; matrix = s.pose; }
      else if (s.kind === "cylinder") { geo = { uuid: uuid("geo"), type: "CylinderGeometry", radiusTop: s.top_radius, radiusBottom: s.radius, height: s.length, radialSegments: 32 }; matrix = mul(s.pose, Y_TO_Z); }
      else if (s.kind === "mesh" && scene.meshes[s.mesh].format === "vtm") { geo = null; matrix = s.pose; }  // built below
      else if (s.kind === "mesh") { geo = { uuid: uuid("geo"), type: "_meshfile_geometry", format: scene.meshes[s.mesh].format, data: meshData[s.mesh] }; matrix = s.pose; }
      else { geo = { uuid: uuid("geo"), type: "SphereGeometry", radius: s.radius, widthSegments: 20, heightSegments: 14 };
             matrix = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, s.center[0], s.center[1], s.center[2], 1]; }
      try {
        if (geo === null) geo = bakedGeometry(s.mesh);
        setMesh(path + "/body", geo, material(s.color, s.opacity, s.on_top ? ON_TOP : null), matrix, s.on_top ? 3 : (s.opacity < 1 ? 1 : 2));
      } catch (e) {
        status.mesh_errors += 1;
        fail("shape " + s.name + ": " + e);
      }
      if (s.kind === "box" && s.wire) {
        var hx = s.size[0] / 2, hy = s.size[1] / 2, hz = s.size[2] / 2, pts = [];
        var c = [[-hx, -hy, -hz], [hx, -hy, -hz], [hx, hy, -hz], [-hx, hy, -hz], [-hx, -hy, hz], [hx, -hy, hz], [hx, hy, hz], [-hx, hy, hz]];
        [[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4], [0, 4], [1, 5], [2, 6], [3, 7]].forEach(function (e) {
          pts.push.apply(pts, c[e[0]]); pts.push.apply(pts, c[e[1]]);
        });
        var g = { uuid: uuid("geo"), type: "BufferGeometry", data: { attributes: { position: { itemSize: 3, type: "Float32Array", array: pts, normalized: false } } } };
        var m = { uuid: uuid("mat"), type: "LineBasicMaterial", color: colorInt(s.color) };
        cmd({ type: "set_object", path: path + "/edges", object: { metadata: { version: 4.5, type: "Object" }, geometries: [g], materials: [m],
              object: { uuid: uuid("obj"), type: "LineSegments", geometry: g.uuid, material: m.uuid, matrix: s.pose } } });
      }
      paths[s.name] = [path];
    });
    var tracers = [];
    scene.lines.forEach(function (ln) {
      var pts = f32(ln.points), path = "/vtm/lines/" + ln.name;
      var arr = Array.prototype.slice.call(ln.n > 1 ? pts : [pts[0], pts[1], pts[2], pts[0], pts[1], pts[2]]);
      var g = { uuid: uuid("geo"), type: "LineGeometry", position: { array: arr } };
      // drawn after the opaque robot and over it: a path inside the wrist stays visible
      var m = { uuid: uuid("mat"), type: "LineMaterial", color: colorInt(ln.color), linewidth: ln.width, transparent: true,
                depthTest: false };
      cmd({ type: "set_object", path: path, object: { metadata: { version: 4.5, type: "Object" }, geometries: [g], materials: [m],
            object: { uuid: uuid("obj"), type: "Line2", geometry: g.uuid, material: m.uuid } } });
      try {  // Meshcat's Line2 reader ignores renderOrder: after the translucent shapes, so none veils a path
        viewer.scene_tree.find(["vtm", "lines", ln.name, "<object>"]).object.renderOrder = 3;
      } catch (e) { /* drawn in distance order instead */ }
      paths[ln.name] = [path];
      if (ln.tracer && ln.times) {
        var tp = "/vtm/tracers/" + ln.name;
        var span = 0;
        for (var i = 3; i < pts.length; i++) span = Math.max(span, Math.abs(pts[i] - pts[i % 3]));
        setMesh(tp + "/dot", { uuid: uuid("geo"), type: "SphereGeometry", radius: Math.max(0.008, 0.03 * span), widthSegments: 16, heightSegments: 12 },
                material(ln.color, 1, ON_TOP), [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1], 3);
        tracers.push({ path: tp, times: f64(ln.times), points: pts });
        paths[ln.name].push(tp);
      }
    });
    scene.clouds.forEach(function (c) {
      var g = { uuid: uuid("geo"), type: "BufferGeometry", data: { attributes: {
        position: { itemSize: 3, type: "Float32Array", array: f32(c.points), normalized: false },
        color: { itemSize: 3, type: "Float32Array", array: f32(c.colors), normalized: false } } } };
      var m = { uuid: uuid("mat"), type: "PointsMaterial", size: c.size, vertexColors: true, sizeAttenuation: true };
      cmd({ type: "set_object", path: "/vtm/clouds/" + c.name, object: { metadata: { version: 4.5, type: "Object" }, geometries: [g],
            materials: [m], object: { uuid: uuid("obj"), type: "Points", geometry: g.uuid, material: m.uuid } } });
      paths[c.name] = ["/vtm/clouds/" + c.name];
    });

    // ------------------------------------------------------------------------------------------------ camera
    // the camera lives under /Cameras/default/rotated, turned +90 deg about x: world (x, y, z) is (x, z, -y) there
    function rotated(p) { return [p[0], p[2], -p[1]]; }
    cmd({ type: "set_property", path: "/Cameras/default/rotated/<object>", property: "position", value: rotated(scene.camera.position) });
    cmd({ type: "set_target", value: rotated(scene.camera.target) });
    if (scene.camera.shift && viewer.camera && viewer.camera.setViewOffset) {  // right of the info panel; a ratio, so
      viewer.camera.setViewOffset(1, 1, -scene.camera.shift / 2, 0, 1, 1);    // it holds when the window resizes
      viewer.camera.updateProjectionMatrix();
    }
    cmd({ type: "set_property", path: "/Axes", property: "visible", value: false });
    cmd({ type: "set_property", path: "/Grid", property: "visible", value: false });
    (function floor(g) {  // a floor grid sized to the scene, under everything drawn
      var pts = [], n = Math.round(2 * g.half / g.step);
      for (var i = 0; i <= n; i++) {
        var a = -g.half + i * g.step;
        pts.push(g.center[0] + a, g.center[1] - g.half, g.z, g.center[0] + a, g.center[1] + g.half, g.z);
        pts.push(g.center[0] - g.half, g.center[1] + a, g.z, g.center[0] + g.half, g.center[1] + a, g.z);
      }
      var geo = { uuid: uuid("geo"), type: "BufferGeometry", data: { attributes: { position: { itemSize: 3, type: "Float32Array", array: pts, normalized: false } } } };
      var m = { uuid: uuid("mat"), type: "LineBasicMaterial", color: 0x9aa3ad, transparent: true, opacity: 0.6 };
      cmd({ type: "set_object", path: "/vtm/floor", object: { metadata: { version: 4.5, type: "Object" }, geometries: [geo], materials: [m],
            object: { uuid: uuid("obj"), type: "LineSegments", geometry: geo.uuid, material: m.uuid } } });
    })(scene.camera.grid);
    cmd({ type: "set_property", path: "/Background", property: "top_color", value: [0.97, 0.975, 0.98] });
    cmd({ type: "set_property", path: "/Background", property: "bottom_color", value: [0.80, 0.82, 0.85] });

    // ------------------------------------------------------------------------------------------------ panels
    document.getElementById("vtm-title").textContent = scene.title;
    var lines = document.getElementById("vtm-lines");
    scene.info.forEach(function (text) { var d = document.createElement("div"); d.textContent = text; lines.appendChild(d); });
    var notes = document.getElementById("vtm-notes");
    scene.notes.forEach(function (text) { var d = document.createElement("div"); d.textContent = "note: " + text; notes.appendChild(d); });
    var legend = document.getElementById("vtm-legend");
    function setVisible(name, on) {
      labels.forEach(function (lb) { if (lb.follows === name) lb.hidden = !on; });
      var layer = layers.filter(function (l) { return l.name === name; })[0];
      if (layer) { layer.wanted = on; on = on && layer.shown; }
      (paths[name] || []).forEach(function (p) { cmd({ type: "set_property", path: p, property: "visible", value: on }); });
    }
    var toggles = {};
    scene.legend.forEach(function (entry) {
      var label = document.createElement("label"), box = document.createElement("input"), sw = document.createElement("span");
      box.type = "checkbox"; box.checked = true;
      sw.className = "vtm-swatch"; sw.style.background = entry.color;
      if (entry.toggles.length) label.appendChild(box); else label.className = "vtm-key";  // a key: nothing to hide
      label.appendChild(sw); label.appendChild(document.createTextNode(entry.text));
      legend.appendChild(label);
      entry.toggles.forEach(function (name) { toggles[name] = box; });
      box.addEventListener("change", function () { entry.toggles.forEach(function (n) { setVisible(n, box.checked); }); });
    });
    var eventColors = { engage: "#1a73f2", slip: "#ffb300", stick: "#d91a1a", release: "#1ab233", lock: "#262626", power_off: "#808080",
                        estop: "#26b340", closest: "#f20d73", unsafe: "#b00020" };
    var list = document.getElementById("vtm-events");
    if (!scene.events.length) document.getElementById("vtm-events-box").hidden = true;

    // ------------------------------------------------------------------------------------------------ player
    var duration = scene.duration, player = document.getElementById("vtm-player");
    var slider = document.getElementById("vtm-slider"), playButton = document.getElementById("vtm-play");
    var timeText = document.getElementById("vtm-time"), speedBox = document.getElementById("vtm-speed");
    var loopBox = document.getElementById("vtm-loop");
    var state = { t: 0, playing: duration > 0, hold: 0.4, last: null };
    if (duration > 0) {
      player.hidden = false;
      slider.max = String(duration);
      var ticks = document.getElementById("vtm-ticks"), spans = document.getElementById("vtm-spans");
      (scene.spans || []).forEach(function (sp) {
        var bar = document.createElement("div");
        bar.className = "vtm-span"; bar.title = sp.text; bar.style.background = sp.color;
        bar.style.left = (100 * sp.start / duration) + "%";
        bar.style.width = Math.max(100 * (sp.end - sp.start) / duration, 0.15) + "%";
        spans.appendChild(bar);
      });
      spans.hidden = !(scene.spans || []).length;
      scene.events.forEach(function (e) {
        var tick = document.createElement("div");
        tick.className = "vtm-tick"; tick.title = e.text;
        tick.style.left = (100 * e.t / duration) + "%"; tick.style.background = eventColors[e.kind] || "#666";
        ticks.appendChild(tick);
        var li = document.createElement("li");
        li.textContent = e.text; li.style.color = eventColors[e.kind] || "#333";
        li.addEventListener("click", function () { seek(e.t, false); });
        list.appendChild(li);
      });
    }

    var jointRows = [];
    var track = scene.joints;
    var trackLayer = null;
    if (track) {
      track.angles = f32(track.angles); track.rates = f32(track.rates); track.held = bytes(track.held);
      trackLayer = layers.filter(function (l) { return l.name === track.layer; })[0];
      var body = document.getElementById("vtm-joint-rows");
      track.names.forEach(function (name) {
        var tr = document.createElement("tr"), cells = [];
        for (var c = 0; c < 4; c++) { var td = document.createElement("td"); tr.appendChild(td); cells.push(td); }
        cells[0].textContent = name;
        body.appendChild(tr); jointRows.push(cells);
      });
      document.getElementById("vtm-joints").hidden = false;
    }

    function frameAt(times, t) { // index i with times[i] <= t < times[i+1], and the fraction in between
      var n = times.length;
      if (n === 1 || t <= times[0]) return [0, 0];
      if (t >= times[n - 1]) return [n - 1, 0];
      var lo = 0, hi = n - 1;
      while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (times[mid] <= t) lo = mid; else hi = mid; }
      var dt = times[hi] - times[lo];
      return [lo, dt > 0 ? (t - times[lo]) / dt : 1];
    }
    var pose = new Float64Array(7);
    function showLayer(layer, t) {
      if (layer.appears) {  // a stop that begins during the motion is not there before it begins
        var shown = t >= layer.times[0];
        if (shown !== layer.shown) {
          layer.shown = shown;
          cmd({ type: "set_property", path: "/vtm/robots/" + layer.name, property: "visible", value: shown && layer.wanted });
        }
      }
      var f = frameAt(layer.times, t), i0 = f[0], a = f[1], i1 = Math.min(i0 + 1, layer.frames - 1), P = layer.poses;
      for (var l = 0; l < layer.n; l++) {
        var o0 = (i0 * layer.n + l) * 7, o1 = (i1 * layer.n + l) * 7, dot = 0;
        for (var k = 3; k < 7; k++) dot += P[o0 + k] * P[o1 + k];
        var sign = dot < 0 ? -1 : 1;
        for (k = 0; k < 7; k++) pose[k] = (1 - a) * P[o0 + k] + a * (k >= 3 ? sign : 1) * P[o1 + k];
        viewer.set_transform(["vtm", "robots", layer.name, String(l)], poseMatrix(pose, 0));
      }
      return i0;
    }
    function fmt(x, d) { return (x >= 0 ? "\u2007" : "") + x.toFixed(d); }
    function show(t) {
      state.t = t;
      var index = 0;
      layers.forEach(function (layer, k) {
        var i = showLayer(layer, t);
        if (layer === trackLayer) index = i;
        if (k === 0) status.last_link = Array.prototype.slice.call(pose);  // what the page set, for tests
      });
      tracers.forEach(function (tr) {
        var f = frameAt(tr.times, t), i0 = f[0], i1 = Math.min(i0 + 1, tr.times.length - 1), a = f[1], p = [];
        for (var k = 0; k < 3; k++) p.push((1 - a) * tr.points[3 * i0 + k] + a * tr.points[3 * i1 + k]);
        viewer.set_transform(tr.path.split("/").slice(1), [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, p[0], p[1], p[2], 1]);
      });
      if (track && trackLayer) {
        var n = track.names.length;
        jointRows.forEach(function (cells, j) {
          var held = track.held[index * n + j] === 1;
          cells[1].textContent = fmt(track.angles[index * n + j] * 180 / Math.PI, 2);
          cells[2].textContent = fmt(track.rates[index * n + j], 3);
          cells[3].textContent = held ? "held" : (Math.abs(track.rates[index * n + j]) > 0 ? "moving" : "-");
          cells[3].className = held ? "held" : "moving";
        });
      }
      if (duration > 0) {
        slider.value = String(t);
        timeText.textContent = "t = " + t.toFixed(4) + " s of " + duration.toFixed(4) + " s";
      }
      viewer.set_dirty();
      status.t = t;
    }
    function seek(t, play) {
      state.playing = !!play; state.hold = 0; state.last = null;
      playButton.textContent = state.playing ? "Pause" : "Play";
      show(Math.min(Math.max(t, 0), duration));
      publish();
    }
    playButton.addEventListener("click", function () {
      if (!state.playing && state.t >= duration) state.t = 0;
      seek(state.t, !state.playing);
    });
    slider.addEventListener("input", function () { seek(parseFloat(slider.value), false); });
    document.addEventListener("keydown", function (e) {
      if (e.target && e.target.tagName === "SELECT") return;
      if (e.code === "Space") { e.preventDefault(); playButton.click(); }
      var step = duration / 200;
      if (e.code === "ArrowRight") seek(state.t + step, false);
      if (e.code === "ArrowLeft") seek(state.t - step, false);
    });

    // ------------------------------------------------------------------------------------------------ labels over the view
    var labelBox = document.getElementById("vtm-labels");
    function readable(hex) {  // a light colour (orange, green) darkened until it reads on the label's white ground
      var c = colorInt(hex), r = (c >> 16) & 255, g = (c >> 8) & 255, b = c & 255;
      var lum = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255, k = lum > 0.38 ? 0.38 / lum : 1;
      function h(x) { return ("0" + Math.round(x * k).toString(16)).slice(-2); }
      return "#" + h(r) + h(g) + h(b);
    }
    var stacked = {};  // labels at one point (a pair and the drive on it) are listed below each other
    var labels = (scene.labels || []).map(function (lb) {
      var d = document.createElement("div"), key = lb.position.map(function (x) { return x.toFixed(4); }).join(",");
      d.className = "vtm-label"; d.textContent = lb.text; d.style.color = readable(lb.color);
      labelBox.appendChild(d);
      stacked[key] = (stacked[key] || 0) + 1;
      return { el: d, p: lb.position, row: stacked[key] - 1, follows: lb.follows || "", hidden: false };
    });
    function placeLabels() {
      var cam = viewer.camera;
      if (!labels.length || !cam) return;
      var V = cam.matrixWorldInverse.elements, P = cam.projectionMatrix.elements;
      var w = labelBox.clientWidth, h = labelBox.clientHeight;
      labels.forEach(function (lb) {
        // Meshcat's scene root turns the Z-up world into three.js's Y-up one: (x, y, z) -> (x, z, -y)
        var p = [lb.p[0], lb.p[2], -lb.p[1], 1], v = [0, 0, 0, 0], c = [0, 0, 0, 0], r, k;
        for (r = 0; r < 4; r++) for (k = 0; k < 4; k++) v[r] += V[k * 4 + r] * p[k];
        for (r = 0; r < 4; r++) for (k = 0; k < 4; k++) c[r] += P[k * 4 + r] * v[k];
        var visible = c[3] > 0 && !lb.hidden;
        lb.el.style.display = visible ? "block" : "none";
        if (visible) { lb.el.style.left = ((c[0] / c[3] + 1) / 2 * w) + "px"; lb.el.style.top = ((1 - c[1] / c[3]) / 2 * h + 17 * lb.row) + "px"; }
      });
    }

    // ------------------------------------------------------------------------------------------------ start
    var hash = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) hash[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    if (hash.speed && !isNaN(parseFloat(hash.speed))) {
      var s = String(parseFloat(hash.speed)), found = false;
      Array.prototype.forEach.call(speedBox.options, function (o) { if (o.value === s) found = true; });
      if (!found) { var o = document.createElement("option"); o.value = s; o.textContent = s + "\u00d7"; speedBox.appendChild(o); }
      speedBox.value = s;
    }
    (hash.hide || "").split(",").forEach(function (name) {
      if (name && paths[name]) { setVisible(name, false); if (toggles[name]) toggles[name].checked = false; }
    });
    if (hash.t !== undefined) seek(hash.t === "end" ? duration : parseFloat(hash.t) || 0, false);
    else { show(0); playButton.textContent = state.playing ? "Pause" : "Play"; }

    function tick(now) {
      if (state.playing && duration > 0) {
        var dt = state.last === null ? 0 : Math.min((now - state.last) / 1000, 0.1);
        if (state.hold > 0) state.hold -= dt;
        else {
          var t = state.t + dt * parseFloat(speedBox.value);
          if (t >= duration) {
            t = duration;
            if (loopBox.checked) state.hold = 1.0; else { state.playing = false; playButton.textContent = "Play"; }
          }
          show(t);
        }
        if (state.hold <= 0 && state.t >= duration && loopBox.checked) { state.hold = 0.4; show(0); }
      }
      state.last = now;
      placeLabels();
      requestAnimationFrame(tick);
    }
    requestAnimationFrame(tick);
    status.ready = true;
    status.ready_ms = Math.round(performance.now());
    publish();
  }
})();
