"""Sensors declared in a URDF with iDynTree's sensor extension, as sparsedyn sensor objects.

    from sparsedyn.urdf_sensors import from_urdf      # also sparsedyn.sensors.from_urdf
    model = sparsedyn.load_urdf(path, floating_base=True)
    sensors = from_urdf(model, convention="idyntree")       # or from_urdf(path, ...)
    problem = EstimationProblem(model, [JointAccelerations()] + sensors, unknown_wrenches=[...])

`from_urdf(model_or_path, convention)` takes a Model loaded by load_urdf (it keeps the URDF it
came from) or the URDF path (or its XML text); any other Model raises TypeError. Sensors keep
their URDF names (the readings' keys).

Format read (iDynTree's, top-level children of <robot>):

    <sensor name="l_leg_ft" type="force_torque">
      <parent joint="l_leg_ft_joint"/>
      <force_torque><frame>child|parent|sensor</frame>
                    <measure_direction>child_to_parent|parent_to_child</measure_direction></force_torque>
      <origin xyz="..." rpy="..."/>          (used by frame "sensor" only: placed in the child link)
    </sensor>
    <sensor name="imu_acc" type="accelerometer|gyroscope">
      <parent link="LINK"/> <origin xyz="..." rpy="..."/>
    </sensor>

  -> ForceTorque / DeclaredForceTorque(joint), Accelerometer(link, origin), Gyroscope(link, origin).
  Any other type, and Gazebo's <gazebo reference=...><sensor> (imu, camera, ...: iDynTree ignores
  them too) are skipped with an UnmappedSensorWarning naming the sensor; a Gazebo force_torque
  sensor on a joint that already has an iDynTree declaration is a duplicate, skipped silently.
  A sensor on a joint/link the URDF lacks, or an F/T declaration without a valid <frame> and
  <measure_direction>, raises SensorError naming it.

The two conventions of F/T readings (both linear-first [force; torque]):

  convention="sparsedyn"  ForceTorque(joint): the wrench the PARENT side exerts on the CHILD side,
                          in the joint frame (= the child link frame), whatever the declaration
                          says; convert readings before passing them.
  convention="idyntree"   DeclaredForceTorque(joint, placement, sign): readings as declared,
                          accepted as-is. measure_direction parent_to_child: the wrench on the
                          child (sign +1); child_to_parent: the wrench the child exerts on the
                          parent (sign -1). frame child: the child link frame (placement identity);
                          parent: the parent link frame (placement = joint origin^-1, fixed joints
                          only, else skipped with a warning); sensor: the frame at <origin> in the
                          child link. y_idyntree = sensor.transform @ y_sparsedyn.
                          iCub (frame child, child_to_parent): y_idyntree = -y_sparsedyn.

Accelerometers (proper acceleration: classical acceleration minus gravity, of the sensor origin,
in the sensor frame) and gyroscopes (angular velocity in the sensor frame) mean the same in both.
"""
from .sensors import DeclaredForceTorque, UnmappedSensorWarning, from_urdf

__all__ = ["from_urdf", "DeclaredForceTorque", "UnmappedSensorWarning"]
