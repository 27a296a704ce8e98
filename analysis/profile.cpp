#include "analysis/profile.h"

#include "common/error.h"
#include "device/timing.h"
#include "isa/dwp.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>

namespace npukit::analysis {

namespace timing = device::timing;

Profile profile_program(const isa::Manifest& manifest, ByteSpan gml, double clock_hz) {
  Profile p;
  p.model = manifest.model;
  p.arch = manifest.arch();
  p.clock_hz = clock_hz;
  device::DeviceConfig cfg;
  cfg.arch = p.arch;
  cfg.dram_bytes = std::max<std::uint64_t>(manifest.ramsize_mb, 1) << 20;
  cfg.timing_only = true;
  const auto t0 = std::chrono::steady_clock::now();
  // Only the instruction packet (the one at DRAM 0: zeroth instruction and instruction region)
  // matters without values; weight and bias packets are skipped unread. If that is not enough
  // (a stream that is not a clean packet sequence, instructions elsewhere), the whole GML is fed,
  // so the device reports what is wrong with it.
  bool clean = true;
  Bytes program;
  for (std::size_t pos = 0; pos < gml.size();) {
    if (gml.size() - pos < 12 || load_be32(gml.data() + pos) != 0xFFFFFFFFu) {
      clean = false;
      break;
    }
    const std::uint64_t ds = load_be32(gml.data() + pos + 4);
    const std::uint32_t addr = load_be32(gml.data() + pos + 8);
    if (ds > gml.size() - pos - 12) {
      clean = false;
      break;
    }
    if (addr == 0) program.insert(program.end(), gml.begin() + pos, gml.begin() + pos + 12 + ds);
    pos += 12 + ds;
  }
  // Each device segment is one run (docs/compiler.md, "Segments"): with several, the zeroth
  // instruction is pointed at the segment's instructions, as the runtime does. The start packet
  // acts only right after a data packet (gati.md 14.4): the inputs are sent (zeros; no value is
  // computed) or, without device inputs, one zero word past the program.
  std::vector<const isa::ManifestSegment*> segments;
  for (const auto& seg : manifest.segments)
    if (seg.is_device()) segments.push_back(&seg);
  auto start_stream = [&](const isa::ManifestSegment* seg) {
    Bytes stream;
    if (seg && segments.size() > 1) {
      isa::Zeroth z;
      z.start = seg->zeroth_start();
      z.end = seg->zeroth_end();
      const auto word = z.encode();
      isa::append_dwp_packet(stream, 0, ByteSpan(word.data(), word.size()));
    }
    const auto inputs = seg ? seg->device_inputs : manifest.device_inputs();
    for (const auto& in : inputs)
      isa::append_dwp_packet(
          stream, in.address,
          Bytes(ceil_mod(std::max<std::uint64_t>(in.bytes, 32), std::uint64_t{32}), 0));
    if (inputs.empty())
      isa::append_dwp_packet(
          stream, static_cast<std::uint32_t>(ceil_mod(manifest.dram_bytes, std::uint64_t{32})),
          Bytes(32, 0));
    isa::append_dwp_start(stream);
    return stream;
  };
  struct Run {
    std::uint64_t total = 0, runs = 0;
    std::vector<ProfileLayer> layers;
  };
  auto run = [&](ByteSpan bytes) {
    device::Device dev(cfg);
    dev.receive_dwp(bytes);
    Run r;
    auto one = [&](const isa::ManifestSegment* seg) {
      const std::uint64_t before = dev.stats().runs;
      dev.receive_dwp(start_stream(seg));
      if (dev.stats().runs == before) fail("profile: the program did not start");
      r.total += dev.stats().total_cycles;
      ++r.runs;
      const auto& ls = dev.stats().layers;
      for (std::size_t i = 0; i < ls.size(); ++i) {
        const std::size_t index = (seg ? static_cast<std::size_t>(seg->first_layer) : 0) + i;
        ProfileLayer l;
        l.name = index < manifest.layers.size() ? manifest.layers[index].name
                                                : std::string(isa::name(ls[i].opcode));
        l.stats = ls[i];
        l.stats.start_cycle += r.total - dev.stats().total_cycles;
        r.layers.push_back(std::move(l));
      }
    };
    if (segments.empty()) one(nullptr);
    for (const auto* seg : segments) one(seg);
    return r;
  };
  Run st;
  if (clean) {
    try {
      st = run(program);
    } catch (const Error&) {
      st = run(gml);
    }
  } else {
    st = run(gml);
  }
  p.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  p.total_cycles = st.total;
  p.run_start_cycles = timing::run_start_cycles() * st.runs;
  p.layers = std::move(st.layers);
  return p;
}

namespace {

double util(const device::LayerStats& s) {
  const auto& m = s.model;
  if (!m.peak_macs_per_cycle || !m.cycles) return 0;
  return static_cast<double>(m.macs) / (static_cast<double>(m.cycles) * m.peak_macs_per_cycle);
}

std::uint64_t peak_of(const isa::SaArch& a) {
  return static_cast<std::uint64_t>(a.rows) * a.cols * a.n_sa;
}

struct Totals {
  std::uint64_t layers = 0, cycles = 0, macs = 0, rd = 0, wr = 0, weights = 0;
};

std::map<std::string, Totals> by_block(const Profile& p) {
  std::map<std::string, Totals> t;
  for (const auto& l : p.layers) {
    Totals& x = t[std::string(isa::name(l.stats.opcode))];
    x.layers++;
    x.cycles += l.stats.model.cycles;
    x.macs += l.stats.model.macs;
    x.rd += l.stats.model.dram_read_bytes;
    x.wr += l.stats.model.dram_write_bytes;
    x.weights += l.stats.model.weight_bytes;
  }
  return t;
}

std::uint64_t total_macs(const Profile& p) {
  std::uint64_t m = 0;
  for (const auto& l : p.layers) m += l.stats.model.macs;
  return m;
}

nlohmann::json layer_json(const ProfileLayer& l) {
  const auto& m = l.stats.model;
  return {{"layer", l.stats.layer_number},
          {"name", l.name},
          {"block", std::string(isa::name(l.stats.opcode))},
          {"start_cycle", l.stats.start_cycle},
          {"cycles", m.cycles},
          {"macs", m.macs},
          {"peak_macs_per_cycle", m.peak_macs_per_cycle},
          {"utilisation", util(l.stats)},
          {"dram_read_bytes", m.dram_read_bytes},
          {"dram_write_bytes", m.dram_write_bytes},
          {"weight_bytes", m.weight_bytes},
          {"bound", std::string(timing::bound_name(m.bound))},
          {"overhead_cycles", m.overhead_cycles},
          {"compute_cycles", m.compute_cycles},
          {"dram_cycles", m.dram_cycles},
          {"dispatch_cycles", m.dispatch_cycles},
          {"passes", m.passes},
          {"dispatch_bytes", l.stats.dispatch_bytes}};
}

}  // namespace

std::string profile_json(const Profile& p) {
  nlohmann::json j;
  j["model"] = p.model;
  j["sa_arch"] = p.arch.str();
  j["clock_hz"] = p.clock_hz;
  j["peak_macs_per_cycle"] = peak_of(p.arch);
  j["run_start_cycles"] = p.run_start_cycles;
  j["total_cycles"] = p.total_cycles;
  j["total_seconds"] = static_cast<double>(p.total_cycles) / p.clock_hz;
  j["macs"] = total_macs(p);
  j["host_seconds"] = p.host_seconds;
  j["layers"] = nlohmann::json::array();
  for (const auto& l : p.layers) j["layers"].push_back(layer_json(l));
  nlohmann::json blocks = nlohmann::json::object();
  for (const auto& [name, t] : by_block(p))
    blocks[name] = {{"layers", t.layers},       {"cycles", t.cycles},
                    {"macs", t.macs},           {"dram_read_bytes", t.rd},
                    {"dram_write_bytes", t.wr}, {"weight_bytes", t.weights}};
  j["blocks"] = blocks;
  nlohmann::json constants = nlohmann::json::array();
  for (const auto& c : timing::kConstants)
    constants.push_back(
        {{"name", std::string(c.name)}, {"value", c.value}, {"source", std::string(c.source)}});
  j["timing_constants"] = constants;
  return j.dump(2) + "\n";
}

std::string profile_table(const Profile& p) {
  std::string s;
  const double ms_per_cycle = 1e3 / p.clock_hz;
  s += fmt::format("{} on {} (peak {} MAC/cycle) at {:.1f} MHz\n",
                   p.model.empty() ? "program" : p.model, p.arch.str(), peak_of(p.arch),
                   p.clock_hz / 1e6);
  s += fmt::format("{:>4}  {:<28} {:<8} {:>11} {:>6} {:>12} {:>6} {:>11} {:>11} {:>10}  {}\n", "#",
                   "layer", "block", "cycles", "%", "MACs", "util", "DRAM rd B", "DRAM wr B",
                   "weight B", "bound");
  const double total = static_cast<double>(std::max<std::uint64_t>(p.total_cycles, 1));
  for (const auto& l : p.layers) {
    const auto& m = l.stats.model;
    std::string name = l.name.size() > 28 ? l.name.substr(0, 27) + "~" : l.name;
    s += fmt::format(
        "{:>4}  {:<28} {:<8} {:>11} {:>5.1f}% {:>12} {:>5.1f}% {:>11} {:>11} {:>10}  {}\n",
        l.stats.layer_number, name, isa::name(l.stats.opcode), m.cycles, 100.0 * m.cycles / total,
        m.macs, 100.0 * util(l.stats), m.dram_read_bytes, m.dram_write_bytes, m.weight_bytes,
        timing::bound_name(m.bound));
  }
  s += "\nper block:\n";
  s += fmt::format("  {:<10} {:>6} {:>12} {:>6} {:>14} {:>12} {:>12} {:>12}\n", "block", "layers",
                   "cycles", "%", "MACs", "DRAM rd B", "DRAM wr B", "weight B");
  for (const auto& [name, t] : by_block(p))
    s += fmt::format("  {:<10} {:>6} {:>12} {:>5.1f}% {:>14} {:>12} {:>12} {:>12}\n", name,
                     t.layers, t.cycles, 100.0 * t.cycles / total, t.macs, t.rd, t.wr, t.weights);
  const std::uint64_t macs = total_macs(p);
  s += fmt::format(
      "\ntotal {} cycles (run start {}) = {:.3f} ms at {:.1f} MHz; {} MACs, {:.1f} MAC/cycle = "
      "{:.1f} % of peak\n",
      p.total_cycles, p.run_start_cycles, p.total_cycles * ms_per_cycle, p.clock_hz / 1e6, macs,
      static_cast<double>(macs) / total,
      100.0 * static_cast<double>(macs) / total / peak_of(p.arch));
  s += fmt::format("timing-only run: {:.3f} ms of host time ({:.3g} simulated cycles/s)\n",
                   p.host_seconds * 1e3,
                   p.host_seconds > 0 ? static_cast<double>(p.total_cycles) / p.host_seconds : 0.0);
  return s;
}

std::string profile_trace(const Profile& p) {
  // One track (tid) per hardware block; timestamps in microseconds at the clock.
  const char* tracks[] = {"config/START",  "im2col", "array",   "tail",
                          "output writer", "DRAM",   "dispatch"};
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back(
      {{"name", "process_name"},
       {"ph", "M"},
       {"pid", 1},
       {"args", {{"name", fmt::format("Gati {} @ {:.0f} MHz", p.arch.str(), p.clock_hz / 1e6)}}}});
  for (int t = 0; t < 7; ++t)
    ev.push_back({{"name", "thread_name"},
                  {"ph", "M"},
                  {"pid", 1},
                  {"tid", t + 1},
                  {"args", {{"name", tracks[t]}}}});
  const double us = 1e6 / p.clock_hz;
  auto slice = [&](int tid, const std::string& name, std::uint64_t start, std::uint64_t dur,
                   nlohmann::json args) {
    if (!dur) return;
    ev.push_back({{"name", name},
                  {"ph", "X"},
                  {"pid", 1},
                  {"tid", tid},
                  {"ts", static_cast<double>(start) * us},
                  {"dur", static_cast<double>(dur) * us},
                  {"args", std::move(args)}});
  };
  slice(1, "run start", 0, p.run_start_cycles, {{"cycles", p.run_start_cycles}});
  for (const auto& l : p.layers) {
    const auto& m = l.stats.model;
    const std::uint64_t s0 = l.stats.start_cycle;
    const std::uint64_t body = m.cycles - std::min(m.cycles, m.dispatch_cycles);
    const std::uint64_t start_cost = std::min<std::uint64_t>(
        body, static_cast<std::uint64_t>(timing::kConstants[timing::kLayer].value));
    const nlohmann::json args = layer_json(l);
    const std::string name = fmt::format("{} {}", l.stats.layer_number, l.name);
    slice(1, name + " START", s0, start_cost, {{"layer", l.name}});
    const std::uint64_t b0 = s0 + start_cost, blen = body - start_cost;
    if (l.stats.opcode == isa::Opcode::CONV || l.stats.opcode == isa::Opcode::POOL) {
      slice(2, name, b0, blen, args);
      slice(3, name, b0, blen, {{"macs", m.macs}, {"passes", m.passes}});
    } else {
      slice(3, name, b0, blen, args);
    }
    slice(4, name, b0, blen, {{"layer", l.name}});
    slice(5, name, b0, blen, {{"bytes", m.dram_write_bytes}});
    slice(6, name, b0, blen,
          {{"read_bytes", m.dram_read_bytes},
           {"write_bytes", m.dram_write_bytes},
           {"dram_bound_cycles", m.dram_cycles}});
    slice(7, name + " dispatch", s0 + body, m.cycles - body, {{"bytes", l.stats.dispatch_bytes}});
  }
  nlohmann::json j;
  j["traceEvents"] = ev;
  j["displayTimeUnit"] = "ns";
  j["otherData"] = {
      {"sa_arch", p.arch.str()}, {"total_cycles", p.total_cycles}, {"clock_hz", p.clock_hz}};
  return j.dump() + "\n";
}

std::string profile_html(const Profile& p) {
  // The page draws itself from the embedded JSON (roofline SVG, per-layer bars, table); nothing
  // is loaded from elsewhere. `</` is escaped so the data cannot close the script element.
  std::string data = profile_json(p);
  std::string safe;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '<')
      safe += "\\u003c";
    else
      safe += data[i];
  }
  std::string html = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>npukit profile</title>
<style>
body{font:14px system-ui,sans-serif;margin:20px;color:#222}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px} td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
td.l,th.l{text-align:left} .compute{fill:#3b7dd8;background:#3b7dd8} .DRAM{fill:#d8763b;background:#d8763b}
.overhead{fill:#888;background:#888} .dispatch{fill:#8b3bd8;background:#8b3bd8}
.key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
svg text{font-size:11px}
</style></head><body>
<h1 id="title">npukit profile</h1>
<div id="summary"></div>
<div class="key">bound by:<span class="compute"></span>compute<span class="DRAM"></span>DRAM<span class="overhead"></span>overhead<span class="dispatch"></span>dispatch</div>
<h2>Roofline</h2>
<svg id="roofline" width="760" height="420" xmlns="http://www.w3.org/2000/svg"></svg>
<h2>Cycles per layer</h2>
<svg id="bars" width="760" xmlns="http://www.w3.org/2000/svg"></svg>
<h2>Layers</h2>
<table id="layers"><thead><tr><th>#</th><th class="l">layer</th><th class="l">block</th><th>cycles</th><th>%</th><th>MACs</th><th>util %</th><th>DRAM rd B</th><th>DRAM wr B</th><th>weight B</th><th class="l">bound</th></tr></thead><tbody></tbody></table>
<script id="profile-data" type="application/json">)HTML";
  html += safe;
  html += R"HTML(</script>
<script>
(function(){
const P=JSON.parse(document.getElementById('profile-data').textContent);
const NS='http://www.w3.org/2000/svg';
function el(tag,attrs,parent,text){const e=document.createElementNS(NS,tag);for(const k in attrs)e.setAttribute(k,attrs[k]);if(text!==undefined)e.textContent=text;if(parent)parent.appendChild(e);return e;}
const ms=P.total_cycles/P.clock_hz*1e3, macs=P.macs;
document.getElementById('title').textContent='npukit profile: '+(P.model||'program')+' on '+P.sa_arch;
document.getElementById('summary').textContent=P.total_cycles.toLocaleString()+' cycles = '+ms.toFixed(3)+' ms at '+(P.clock_hz/1e6).toFixed(1)+' MHz; '+macs.toLocaleString()+' MACs; '+(macs/Math.max(P.total_cycles,1)).toFixed(1)+' MAC/cycle of '+P.peak_macs_per_cycle+' peak; '+P.layers.length+' layers';
// Roofline: x = MACs per DRAM byte, y = MAC/cycle; roofs: peak MAC/cycle and 32 B/cycle DRAM.
const svg=document.getElementById('roofline'), W=760,H=420,L=60,R=20,T=20,B=40;
const pts=P.layers.map(l=>({l:l,x:l.macs/Math.max(1,l.dram_read_bytes+l.dram_write_bytes),y:l.macs/Math.max(1,l.cycles)}));
const peak=P.peak_macs_per_cycle, bw=32;
let xmin=1e-3,xmax=1e3,ymin=1e-2,ymax=peak*2;
pts.forEach(p=>{if(p.x>0){xmin=Math.min(xmin,p.x/2);xmax=Math.max(xmax,p.x*2);} if(p.y>0)ymin=Math.min(ymin,p.y/2);});
const lx=v=>L+(Math.log10(v)-Math.log10(xmin))/(Math.log10(xmax)-Math.log10(xmin))*(W-L-R);
const ly=v=>H-B-(Math.log10(v)-Math.log10(ymin))/(Math.log10(ymax)-Math.log10(ymin))*(H-T-B);
el('rect',{x:L,y:T,width:W-L-R,height:H-T-B,fill:'none',stroke:'#999'},svg);
for(let e=Math.ceil(Math.log10(xmin));e<=Math.log10(xmax);e++){el('line',{x1:lx(10**e),x2:lx(10**e),y1:T,y2:H-B,stroke:'#eee'},svg);el('text',{x:lx(10**e),y:H-B+14,'text-anchor':'middle'},svg,'1e'+e);}
for(let e=Math.ceil(Math.log10(ymin));e<=Math.log10(ymax);e++){el('line',{x1:L,x2:W-R,y1:ly(10**e),y2:ly(10**e),stroke:'#eee'},svg);el('text',{x:L-4,y:ly(10**e)+4,'text-anchor':'end'},svg,'1e'+e);}
el('text',{x:(W+L)/2,y:H-6,'text-anchor':'middle'},svg,'operational intensity: MACs per DRAM byte');
el('text',{x:14,y:(H)/2,transform:'rotate(-90 14 '+H/2+')','text-anchor':'middle'},svg,'MAC per cycle');
const knee=peak/bw; const x0=Math.max(xmin,ymin/bw);
el('polyline',{points:lx(x0)+','+ly(bw*x0)+' '+lx(knee)+','+ly(peak)+' '+lx(xmax)+','+ly(peak),fill:'none',stroke:'#c00','stroke-width':2,'class':'roof'},svg);
el('text',{x:lx(xmax)-4,y:ly(peak)-6,'text-anchor':'end',fill:'#c00'},svg,'compute roof '+peak+' MAC/cycle');
el('text',{x:lx(Math.max(x0*3,xmin*3)),y:ly(bw*Math.max(x0*3,xmin*3))-8,fill:'#c00'},svg,'DRAM 32 B/cycle');
pts.forEach(p=>{const x=p.x>0?p.x:xmin, y=p.y>0?p.y:ymin;
  const c=el('circle',{cx:lx(x),cy:ly(y),r:5,'class':'layer-point '+p.l.bound,'data-layer':p.l.name,opacity:0.8},svg);
  el('title',{},c,p.l.layer+' '+p.l.name+' ('+p.l.block+'): '+p.l.cycles+' cycles, '+p.y.toFixed(2)+' MAC/cycle, '+p.l.bound+'-bound');});
// Bars.
const bars=document.getElementById('bars'), bh=14, maxc=Math.max(1,...P.layers.map(l=>l.cycles));
bars.setAttribute('height',P.layers.length*(bh+3)+10);
P.layers.forEach((l,i)=>{const y=i*(bh+3)+5;
  el('text',{x:236,y:y+bh-3,'text-anchor':'end'},bars,(l.layer+' '+l.name).slice(0,36));
  const r=el('rect',{x:240,y:y,width:Math.max(1,(W-330)*l.cycles/maxc),height:bh,'class':'layer-bar '+l.bound,'data-layer':l.name},bars);
  el('title',{},r,l.cycles+' cycles ('+l.bound+')');
  el('text',{x:244+(W-330)*l.cycles/maxc,y:y+bh-3},bars,l.cycles.toLocaleString());});
// Table.
const tb=document.querySelector('#layers tbody');
P.layers.forEach(l=>{const tr=document.createElement('tr');tr.className='layer-row';tr.dataset.layer=l.name;
  const cells=[l.layer,l.name,l.block,l.cycles.toLocaleString(),(100*l.cycles/Math.max(1,P.total_cycles)).toFixed(1),l.macs.toLocaleString(),(100*l.utilisation).toFixed(1),l.dram_read_bytes.toLocaleString(),l.dram_write_bytes.toLocaleString(),l.weight_bytes.toLocaleString(),l.bound];
  cells.forEach((c,k)=>{const td=document.createElement('td');td.textContent=c;if(k==1||k==2||k==10)td.className='l';tr.appendChild(td);});tb.appendChild(tr);});
document.body.dataset.rendered=String(P.layers.length);
})();
</script>
</body></html>
)HTML";
  return html;
}

std::string sweep_table(const std::vector<Profile>& profiles) {
  std::string s =
      fmt::format("{:<9} {:>6} {:>13} {:>10} {:>10} {:>8} {:>13} {:>13}\n", "sa_arch", "layers",
                  "cycles", "ms", "MAC/cycle", "util", "DRAM rd B", "DRAM wr B");
  for (const auto& p : profiles) {
    std::uint64_t rd = 0, wr = 0;
    for (const auto& l : p.layers) {
      rd += l.stats.model.dram_read_bytes;
      wr += l.stats.model.dram_write_bytes;
    }
    const double c = static_cast<double>(std::max<std::uint64_t>(p.total_cycles, 1));
    const double mpc = static_cast<double>(total_macs(p)) / c;
    s += fmt::format("{:<9} {:>6} {:>13} {:>10.3f} {:>10.1f} {:>7.1f}% {:>13} {:>13}\n",
                     p.arch.str(), p.layers.size(), p.total_cycles,
                     p.total_cycles * 1e3 / p.clock_hz, mpc, 100.0 * mpc / peak_of(p.arch), rd, wr);
  }
  return s;
}

}  // namespace npukit::analysis
