//! Issue 27: the Pareto chart and table of deployments (throughput per GPU vs interactivity),
//! on a fixed frontier of two deployments with exact figures.

use servelab_metrics::pareto::{frontier, FrontInput, FrontSeries, Frontier};
use servelab_outputs::chart::{render_svg, Style, FADED};
use servelab_outputs::pareto::{pareto_chart, pareto_table, FRONT_LABEL};

fn input(label: &str, tput: f64, tpot: f64, gpus: Option<u32>) -> FrontInput {
    FrontInput {
        label: label.into(),
        output_throughput: Some(tput),
        tpot_mean_ms: Some(tpot),
        gpus,
    }
}

/// Two deployments of one model at concurrency 1..32: TP4 on 4 GPUs, TP8 on 8.
fn two_deployments(gpus: (Option<u32>, Option<u32>)) -> Frontier {
    let tp4 = [
        (1, 95.0, 10.0),
        (4, 340.0, 11.0),
        (8, 600.0, 12.5),
        (16, 960.0, 15.0),
        (32, 1280.0, 22.0),
    ];
    let tp8 =
        [(1, 110.0, 8.5), (4, 420.0, 9.0), (8, 800.0, 9.5), (16, 1440.0, 10.5), (32, 2400.0, 12.5)];
    let series = |name: &str, rows: &[(u32, f64, f64)], g: Option<u32>| FrontSeries {
        name: name.into(),
        points: rows.iter().map(|&(c, t, tp)| input(&c.to_string(), t, tp, g)).collect(),
    };
    frontier(&[series("tp4", &tp4, gpus.0), series("tp8", &tp8, gpus.1)])
}

#[test]
fn table_has_per_gpu_and_per_user_columns() {
    let f = two_deployments((Some(4), Some(8)));
    insta::assert_snapshot!("table", pareto_table(&f, "Concurrency").to_markdown());
    // TP4 at 32: 1280 / 4 = 320 tok/s/GPU at 1000 / 22 = 45.45 tok/s/user.
    let p = &f.points[4];
    assert_eq!((p.per_gpu, p.on_front), (Some(320.0), true));
    assert_eq!(format!("{:.2}", p.interactivity), "45.45");
    assert!(f.notes().is_empty());
}

#[test]
fn chart_fades_the_dominated_points_and_steps_along_the_front() {
    let f = two_deployments((Some(4), Some(8)));
    let c = pareto_chart(&f, "500x100-pareto", "500x100: throughput per GPU vs interactivity");
    let styles: Vec<Style> = c.series.iter().map(|s| s.style).collect();
    assert_eq!(styles, [Style::Points, Style::Points, Style::Front]);
    assert_eq!(c.series[2].label, FRONT_LABEL);
    let faded: Vec<Vec<bool>> = c.series[..2].iter().map(|s| s.faded.clone()).collect();
    assert_eq!(
        faded,
        [vec![true, true, true, true, false], vec![false, false, false, false, false]]
    );
    assert_eq!(c.series[0].notes, ["1", "4", "8", "16", "32"]);
    // The front: interactivity rising, throughput per GPU falling.
    let front: Vec<(f64, f64)> =
        c.series[2].points.iter().map(|&(x, y)| ((x * 100.0).round() / 100.0, y)).collect();
    assert_eq!(
        front,
        [
            (45.45, 320.0),
            (80.0, 300.0),
            (95.24, 180.0),
            (105.26, 100.0),
            (111.11, 52.5),
            (117.65, 13.75)
        ]
    );
    let svg = render_svg(&c).unwrap();
    // Five faded markers (TP4 at 1..16) and their labels at lower opacity.
    let faded_circles = svg.matches(&format!("opacity=\"{FADED}\"")).count();
    assert_eq!(faded_circles, 4, "TP4's four dominated markers");
    for t in [
        "Output tokens/s per GPU",
        "Interactivity: output tokens/s per user (1000 / mean TPOT)",
        "tp4",
        "tp8",
        FRONT_LABEL,
    ] {
        assert!(svg.contains(&format!("\n{t}\n</text>")), "no '{t}'");
    }
    insta::assert_snapshot!("chart_svg", svg);
}

#[test]
fn without_gpu_counts_the_chart_is_per_deployment_and_says_so() {
    let f = two_deployments((None, None));
    let c = pareto_chart(&f, "p", "p");
    assert_eq!(c.y_label, "Output tokens/s per deployment (per GPU unknown: pass --gpus)");
    assert_eq!(
        f.notes(),
        ["Throughput is per deployment (per GPU unknown: pass --gpus): no run states its GPU count."]
    );
    // Mixed: TP8 has no count, so its points are left out rather than put beside per-GPU ones.
    let f = two_deployments((Some(4), None));
    assert_eq!(f.points.len(), 5);
    assert_eq!(f.notes().len(), 1);
    assert!(f.points.iter().all(|p| p.on_front || p.label != "32"));
    insta::assert_snapshot!(
        "table_mixed",
        format!("{}\n{}", pareto_table(&f, "Concurrency").to_markdown(), f.notes().join("\n"))
    );
}
